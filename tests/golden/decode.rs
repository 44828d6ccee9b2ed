//! `value_decode`, `key_decode`, `is_tombstone`: strict value and key decoding through the
//! invalid-message hook, and which config values delete a key.

use flechtwerk::json::Value;
use flechtwerk::observer::InvalidOutcome;
use flechtwerk::testing::{Observed, RecordingObserver};
use flechtwerk::wire::{self, DecodeError, Part};

use crate::vectors::{
    cases, field, hex_field, int, items, opt, part_name, raw_record, show, text, text_of, to_hex, RecordingPolicy,
};

/// INV-02 (value decoding through the hook), INV-17 (tombstones never reach it).
#[test]
fn inv_02_inv_17_value_decode_matches_python() {
    for case in cases("value_decode") {
        let name = text_of(case, "name");
        let value = hex_field(case, "value_hex");
        let shown = format!("{name} {:?}", value.as_deref().map(String::from_utf8_lossy));
        let want_tombstone = matches!(field(case, "is_tombstone"), Value::Bool(true));
        assert_eq!(wire::is_tombstone(value.as_deref()), want_tombstone, "{shown}: is_tombstone");

        let policy = RecordingPolicy::new("skip");
        let observer = RecordingObserver::default();
        let record = raw_record("t", 0, 7, Some(b"k"), value.as_deref());
        let decoded =
            flechtwerk::testing::decode_input(&record, &policy, &observer).expect("a skipping policy never errors");
        let calls = policy.calls();
        match text_of(case, "result") {
            "tombstone" => {
                // As Python's `parse_message`: a null value is `value: None`, never decoded and
                // never shown to the hook (INV-17); an empty value is an empty event.
                let message = decoded.unwrap_or_else(|| panic!("{shown}: not skipped"));
                assert!(message.value.is_none() && calls.is_empty(), "{shown}: {message:?} {calls:?}");
            }
            "ok" => {
                if let Some(reencoded) = opt(case, "reencoded_hex") {
                    let message = decoded.unwrap_or_else(|| panic!("{shown}: skipped, Python decodes: {calls:?}"));
                    let value = message.value.unwrap_or_else(|| panic!("{shown}: only a null value is None"));
                    assert_eq!(to_hex(&value.encode().unwrap()), text(reencoded), "{shown}");
                    assert!(calls.is_empty(), "{shown}: {calls:?}");
                } else {
                    // Divergence: NaN / infinity / lone surrogates decode in Python and fail when
                    // encoded; we treat the record as invalid at decode (the hook decides).
                    assert!(opt(case, "reencode_error").is_some(), "{shown}");
                    assert!(decoded.is_none(), "{shown}: we reject at decode");
                    assert_eq!(calls.len(), 1, "{shown}");
                    assert_eq!((calls[0].0, calls[0].4), (Part::Value, "JSONDecodeError"), "{shown}");
                }
            }
            "invalid" => {
                assert!(decoded.is_none(), "{shown}: Python calls the hook, we decoded");
                let error = field(case, "error");
                let cause = text_of(field(error, "cause"), "type");
                assert_eq!(text_of(case, "part"), "value", "{shown}");
                assert_eq!(calls, [(Part::Value, "t".to_owned(), 0, 7, cause)], "{shown}");
                assert_eq!(
                    observer.events(),
                    [Observed::MessageInvalid { topic: "t".into(), outcome: InvalidOutcome::Skipped }],
                    "{shown}"
                );
            }
            other => panic!("{shown}: unexpected result {other:?}"),
        }
    }
}

/// INV-01 (strict UTF-8 keys, absent = ""), INV-16 (the key decides first).
#[test]
fn inv_01_key_decode_matches_python() {
    for case in cases("key_decode") {
        let key = hex_field(case, "key_hex");
        let shown = format!("{} {:?}", text_of(case, "name"), opt(case, "key_hex"));
        match (wire::decode_key(key.as_deref()), opt(case, "ok")) {
            (Ok(decoded), Some(ok)) => {
                assert_eq!(decoded, text(ok), "{shown}");
                assert_eq!(to_hex(decoded.as_bytes()), text_of(case, "ok_hex"), "{shown}: key bytes round-trip");
            }
            (Err(DecodeError::Utf8(e)), None) => {
                // Same verdict, and the same place: Python's `start` is our `valid_up_to`.
                let error = field(case, "error");
                assert_eq!(e.valid_up_to() as i64, int(field(error, "start")), "{shown}");
                let want_len = match text_of(error, "reason") {
                    "unexpected end of data" => None,
                    _ => Some((int(field(error, "end")) - int(field(error, "start"))) as usize),
                };
                assert_eq!(e.error_len(), want_len, "{shown}");
            }
            (got, want) => panic!("{shown}: Python {want:?} / {:?}, ours {got:?}", opt(case, "error")),
        }
        let policy = RecordingPolicy::new("skip");
        let record = raw_record("t", 1, 2, key.as_deref(), Some(b"{}"));
        let decoded = flechtwerk::testing::decode_input(&record, &policy, &RecordingObserver::default()).unwrap();
        let want = if text_of(case, "parse_message") == "ok" { "ok" } else { "skipped" };
        assert_eq!(if decoded.is_some() { "ok" } else { "skipped" }, want, "{shown}");
        let parts: Vec<&str> = policy.calls().iter().map(|c| part_name(c.0)).collect();
        let want_parts: Vec<&str> = items(field(case, "hook_parts")).iter().map(text).collect();
        assert_eq!(parts, want_parts, "{shown}");
    }
}

/// CFG-12 / CFG-31: a null, empty or exactly `{}` value deletes a config key; nothing else does.
#[test]
fn cfg_12_is_tombstone_matches_python() {
    for case in cases("is_tombstone") {
        let value = match opt(case, "value_str") {
            Some(s) => Some(text(s).as_bytes().to_vec()),
            None => hex_field(case, "value_hex"),
        };
        let want = matches!(field(case, "is_tombstone"), Value::Bool(true));
        assert_eq!(wire::is_tombstone(value.as_deref()), want, "{}", show(case));
    }
}
