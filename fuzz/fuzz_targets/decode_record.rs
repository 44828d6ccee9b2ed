//! Key + value decoding (INV-01..19): strict decoding never panics, agrees with the canonical
//! scanner, and the policy's three outcomes behave on any input.
#![no_main]

use std::sync::Arc;

use bytes::Bytes;
use flechtwerk::json::{self, check_canonical_object};
use flechtwerk::testing::RecordingObserver;
use flechtwerk::wire::{self, InvalidMessageAction, Part, PolicyError, RaisePolicy, RawRecord};
use flechtwerk::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Layout: [flags][key length][key][value]; flags pick absent key / absent value.
    let Some((&flags, rest)) = data.split_first() else { return };
    let Some((&key_len, rest)) = rest.split_first() else { return };
    let key_len = usize::from(key_len).min(rest.len());
    let (key, value) = rest.split_at(key_len);
    let record = RawRecord {
        topic: Arc::from("fuzz"),
        partition: 3,
        offset: 4711,
        timestamp_ms: None,
        key: (flags & 1 == 0).then(|| Bytes::copy_from_slice(key)),
        value: (flags & 2 == 0).then(|| Bytes::copy_from_slice(value)),
        headers: Vec::new(),
    };

    let key_ok = wire::decode_key(record.key.as_deref()).is_ok();
    assert_eq!(key_ok, record.key.as_deref().is_none_or(|k| std::str::from_utf8(k).is_ok()));
    match wire::decode_value(record.value.as_deref()) {
        Ok(map) => {
            // The canonical re-encoding decodes to the same record, and is canonical.
            let bytes = Record::wrap(map.clone()).encode().expect("decoded values encode");
            assert_eq!(wire::decode_value(Some(&bytes)).expect("canonical bytes decode"), map);
            assert_eq!(check_canonical_object(&bytes), Ok(true));
            if let Some(v) = record.value.as_deref().filter(|v| !v.is_empty()) {
                assert_eq!(check_canonical_object(v) == Ok(true), v == &bytes[..]);
            }
        }
        Err(_) => {
            let v = record.value.as_deref().expect("absent values decode");
            assert!(check_canonical_object(v) != Ok(true));
        }
    }
    // The canonical scanner and the parser accept the same texts.
    if let Some(v) = record.value.as_deref() {
        let parsed = std::str::from_utf8(v).ok().map(json::parse);
        assert_eq!(check_canonical_object(v).is_ok(), matches!(parsed, Some(Ok(_))));
    }

    // Raise: an error exactly when something fails to decode, naming the part; no raw bytes.
    let observer = RecordingObserver::default();
    let raised = flechtwerk::testing::decode_input(&record, &RaisePolicy, &observer);
    let value_ok = wire::decode_value(record.value.as_deref()).is_ok();
    match &raised {
        Ok(Some(_)) => assert!(key_ok && value_ok),
        Ok(None) => unreachable!("raise never skips"),
        Err(PolicyError::Raised(e)) => {
            assert_eq!(e.part(), if key_ok { Part::Value } else { Part::Key });
            assert!(e.to_string().contains("fuzz/3/4711"));
        }
        Err(other) => panic!("unexpected {other:?}"),
    }
    // Skip: never an error. Substitute: an error only for a key (state identity).
    assert!(flechtwerk::testing::decode_input(&record, &|_: &_| InvalidMessageAction::Skip, &observer).is_ok());
    let substitute = |_: &_| InvalidMessageAction::Substitute(Record::new());
    match flechtwerk::testing::decode_input(&record, &substitute, &observer) {
        Ok(Some(_)) => assert!(key_ok),
        Ok(None) => unreachable!("substitute never skips"),
        Err(PolicyError::KeySubstitution(_)) => assert!(!key_ok),
        Err(other) => panic!("unexpected {other:?}"),
    }
    // One count per hook call (at most one per part per policy, three policies).
    assert!(observer.events().len() <= 3);
});
