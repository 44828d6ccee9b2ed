//! Messages and the invalid-message hook: payload bytes, hook outcomes, record timestamps,
//! state dedup and state deserialization.

use chrono::Utc;
use flechtwerk::attribute::{Codec, DATETIME};
use flechtwerk::json::Value;
use flechtwerk::observer::InvalidOutcome;
use flechtwerk::testing::{Observed, RecordingObserver};
use flechtwerk::wire::{self, DecodeError, Part, PolicyError, RaisePolicy};
use flechtwerk::{Event, InvalidMessageAction, InvalidMessageError, Message, Record, State};

use crate::vectors::{
    cases, category, field, hex, int, items, object, opt, python_cause, raw_record, text, text_of, to_hex,
};

/// ATTR-41 / ATTR-43: payload bytes (bytes verbatim, str as raw UTF-8, Event as canonical JSON,
/// a None value as a Kafka null); INV-31: the error text names part and position.
#[test]
fn attr_43_message_encodings_match_python() {
    let message = category("message");
    for case in items(field(message, "encode")) {
        let payload = text_of(case, "payload_py");
        let msg = match payload {
            "str 'M\\u00fcller'" => Message::new("t", "M\u{fc}ller", "M\u{fc}ller"),
            "str ''" => Message::new("t", "", ""),
            "bytes b'\\xff\\x00'" => Message::new("t", &b"\xff\x00"[..], &b"\xff\x00"[..]),
            "Event.wrap({'b':2,'a':1})" => {
                Message::new("t", Event::wrap(object(r#"{"b":2,"a":1}"#)), Event::wrap(object(r#"{"b":2,"a":1}"#)))
            }
            "Event()" => Message::new("t", Event::new(), Event::new()),
            "str '{\"a\":1}' (not re-encoded)" => Message::new("t", r#"{"a":1}"#, r#"{"a":1}"#),
            "Event.wrap({'s':'M\\u00fcller'})" => Message::new(
                "t",
                Event::wrap(object("{\"s\":\"M\u{fc}ller\"}")),
                Event::wrap(object("{\"s\":\"M\u{fc}ller\"}")),
            ),
            "None (value)" => {
                assert_eq!(field(case, "encode_value_hex"), &Value::Null);
                assert_eq!(Message::tombstone("t", "k").encode_value(), Ok(None));
                continue;
            }
            other => panic!("unmapped message case {other:?}"),
        };
        assert_eq!(to_hex(&msg.encode_key().unwrap()), text_of(case, "encode_json_hex"), "{payload}: key");
        let value = msg.encode_value().unwrap().expect("not a tombstone");
        assert_eq!(to_hex(&value), text_of(case, "encode_value_hex"), "{payload}: value");
    }
    for case in items(field(message, "validation")) {
        let expr = text_of(case, "expr");
        match expr {
            "Message(value=None) tombstone" => assert_eq!(Message::tombstone("t", "k").value(), None),
            "Message(value=Event(State.wrap({'a':1})))" => {
                let state = State::wrap(object(r#"{"a":1}"#));
                let msg = Message::new("t", "k", Event::from(state.into_record()));
                assert_eq!(msg.encode_value().unwrap().unwrap(), &br#"{"a":1}"#[..]);
            }
            // The other constructions (None key, Config, State, raw dict, int, Record, bytearray)
            // are compile errors in Rust: `IntoPayload` is implemented for bytes, str and Event only.
            _ => assert!(opt(case, "error").is_some(), "{expr}: unmapped accepted construction"),
        }
    }
    // INV-31: the wording differs from Python's (docs/compatibility.md), the facts do not.
    let record = raw_record("my-topic", 3, 4711, Some(b"k"), Some(b"v"));
    let ours = InvalidMessageError::new(Part::Value, &record, DecodeError::NotAnObject { found: "int" }).to_string();
    let python = text(field(message, "invalid_message_error_str"));
    for fact in ["value", "my-topic/3/4711", "on_invalid_message"] {
        assert!(ours.contains(fact) && python.contains(fact), "{fact:?} in {ours:?} and {python:?}");
    }
}

/// INV-13 (substitutes, even empty ones, are Events), INV-14 (no key substitution), INV-11
/// (raise is the default), INV-20 (every call is counted).
#[test]
fn inv_13_14_hook_outcomes_match_python() {
    for case in cases("hook_errors") {
        let name = text_of(case, "case");
        let observer = RecordingObserver::default();
        let counted = |outcome| [Observed::MessageInvalid { topic: "in".into(), outcome }];
        let bad_key = raw_record("in", 2, 9, Some(b"\xff"), Some(b"{}"));
        let bad_value = raw_record("in", 2, 10, Some(b"k"), Some(b"{bad"));
        match name {
            "key failure + handler returns a Record" => {
                let policy =
                    |_: &InvalidMessageError| InvalidMessageAction::Substitute(Record::wrap(object(r#"{"id":"x"}"#)));
                let err = flechtwerk::testing::decode_input(&bad_key, &policy, &observer).unwrap_err();
                let PolicyError::KeySubstitution(e) = &err else { panic!("{name}: {err:?}") };
                assert!(matches!(e.decode_error(), DecodeError::Utf8(_)), "{name}");
                assert!(err.to_string().contains("state identity") && err.to_string().contains("in/2/9"), "{err}");
                // Divergence: Python counts this call `substituted` (the handler returned a Record)
                // before raising its TypeError; we count the outcome that happens, `raised`.
                assert_eq!(observer.events(), counted(InvalidOutcome::Raised), "{name}");
            }
            "value failure + handler returns a dict" => {} // a type error in Rust
            "value failure + handler returns a State → retyped Event" => {
                let policy = |_: &InvalidMessageError| {
                    InvalidMessageAction::Substitute(State::wrap(object(r#"{"id":"x"}"#)).into_record())
                };
                let msg =
                    flechtwerk::testing::decode_input(&bad_value, &policy, &observer).unwrap().expect("substituted");
                let value: Event = msg.value.expect("substituted"); // the call site assigns the type
                assert_eq!(to_hex(&value.encode().unwrap()), text_of(case, "value_hex"), "{name}");
                assert_eq!(observer.events(), counted(InvalidOutcome::Substituted), "{name}");
            }
            "value failure + handler returns empty Record (falsy) → substitution, not skip" => {
                assert_eq!(text_of(case, "result"), "substituted");
                let policy = |_: &InvalidMessageError| InvalidMessageAction::Substitute(Record::new());
                let msg =
                    flechtwerk::testing::decode_input(&bad_value, &policy, &observer).unwrap().expect("substituted");
                assert_eq!(to_hex(&msg.value.unwrap().encode().unwrap()), text_of(case, "value_hex"), "{name}");
                assert_eq!(observer.events(), counted(InvalidOutcome::Substituted), "{name}");
            }
            "default raise" => {
                let err = flechtwerk::testing::decode_input(&bad_value, &RaisePolicy, &observer).unwrap_err();
                let PolicyError::Raised(e) = err else { panic!("{name}: {err:?}") };
                assert_eq!((e.part(), e.topic(), e.partition(), e.offset()), (Part::Value, "in", 2, 10));
                assert_eq!(python_cause(e.decode_error()), text_of(field(field(case, "error"), "cause"), "type"));
                assert_eq!(observer.events(), counted(InvalidOutcome::Raised), "{name}");
            }
            other => panic!("unmapped hook_errors case {other:?}"),
        }
    }
}

/// ATTR-40: record timestamps. Ours are exact millisecond arithmetic; Python's go through
/// floats, so a few differ (pinned here by count, explained in docs/compatibility.md).
#[test]
fn attr_40_timestamps_vs_python() {
    let timestamps = category("timestamps");
    let mut float_artefacts = 0;
    for case in items(field(timestamps, "millis_to_datetime")) {
        let millis = int(field(case, "millis"));
        let mut record = raw_record("t", 0, 0, Some(b"k"), None);
        record.timestamp_ms = Some(millis);
        let msg =
            flechtwerk::testing::decode_input(&record, &RaisePolicy, &RecordingObserver::default()).unwrap().unwrap();
        let ts = msg.timestamp.expect("timestamp");
        let python = text_of(case, "isoformat");
        assert_eq!(ts.format("%Y-%m-%dT%H:%M:%S").to_string(), python[..19], "{millis}");
        let exact = millis.rem_euclid(1000) * 1000;
        assert_eq!(i64::from(ts.timestamp_subsec_micros()), exact, "{millis}");
        if int(field(case, "microsecond")) != exact {
            float_artefacts += 1; // Python: fromtimestamp(ms / 1000), float rounding
        }
    }
    assert_eq!(float_artefacts, 1, "millis_to_datetime float artefacts (253402300799999)");

    let mut differ = 0;
    for case in items(field(timestamps, "datetime_to_millis")) {
        let iso = text_of(case, "isoformat");
        let value = DATETIME.decode(&Value::Str(iso.to_owned())).unwrap();
        let utc = value.to_chrono().expect("aware").with_timezone(&Utc);
        let millis = Message::new("t", "k", "v").with_timestamp(utc).timestamp_ms().unwrap();
        assert_eq!(millis, int(field(case, "exact_floor")), "{iso}: floor of the exact instant");
        if millis != int(field(case, "datetime_to_millis")) {
            differ += 1; // Python: int(dt.timestamp() * 1000), float product truncated toward zero
        }
    }
    // 12 float artefacts (`...:01.001` gives 1000) and 2 pre-1970 instants (truncation toward zero).
    assert_eq!(differ, 14, "datetime_to_millis cases where Python's float arithmetic differs");
}

/// TRX-20: a state is written only when it differs from the baseline. Ours is type-strict JSON
/// equality (equal exactly when the bytes are equal, ATTR-44); Python's dict equality treats
/// `1 == 1.0 == True` and `0.0 == -0.0` as equal.
#[test]
fn trx_20_attr_44_state_dedup_vs_python() {
    let mut divergent = Vec::new();
    for case in cases("state_dedup") {
        let (baseline, yielded) = (text_of(case, "baseline"), text_of(case, "yielded"));
        let (a, b) = (State::wrap(object(baseline)), State::wrap(object(yielded)));
        assert_eq!(to_hex(&a.encode().unwrap()), text_of(case, "baseline_bytes_hex"), "{baseline}");
        assert_eq!(to_hex(&b.encode().unwrap()), text_of(case, "yielded_bytes_hex"), "{yielded}");
        let bytes_differ = text_of(case, "baseline_bytes_hex") != text_of(case, "yielded_bytes_hex");
        let ours = a != b;
        assert_eq!(ours, bytes_differ, "{baseline} vs {yielded}: equal exactly when the bytes are");
        let python = matches!(field(case, "changed"), Value::Bool(true));
        if ours != python {
            divergent.push(format!("{baseline} {yielded}"));
        }
    }
    assert_eq!(
        divergent,
        [
            r#"{"a":1} {"a":1.0}"#,
            r#"{"a":1} {"a":true}"#,
            r#"{"a":0} {"a":false}"#,
            r#"{"a":0.0} {"a":-0.0}"#,
            r#"{"a":{"x":1}} {"a":{"x":1.0}}"#,
            r#"{"a":1e16} {"a":10000000000000000}"#,
        ]
    );
}

/// STO-03, INV-40 (mixed-fleet hazard 7): reading a stored state. The engine reads changelog
/// bytes with the strict value decoder (`wire::decode_value`, at the first read of a key); Python's
/// `state.deserialize` is `json.loads(bytes)`, which also reads a UTF-8 BOM, UTF-16 (sniffed), a
/// CESU-8 surrogate (`surrogatepass`) and NaN. Neither implementation writes those bytes (both
/// encode canonically), so only a foreign writer can put them in a changelog; there Python reads
/// what we report as corrupt state (and crashes later at the put for the surrogate and NaN).
/// Both refuse non-objects and invalid UTF-8. An empty value never reaches a read: restore
/// deletes on it (`is_tombstone`).
#[test]
fn sto_03_state_deserialize_vs_python() {
    for case in cases("state_deserialize") {
        let name = text_of(case, "name");
        let bytes = hex(text_of(case, "bytes_hex"));
        let ours = wire::decode_value(Some(&bytes));
        match name {
            "plain" => {
                let reserialized = State::wrap(ours.unwrap()).encode().unwrap();
                assert_eq!(to_hex(&reserialized), text_of(case, "reserialized_hex"), "{name}");
            }
            "utf8_bom" | "utf16" => {
                assert!(opt(case, "reserialized_hex").is_some(), "{name}: Python reads and rewrites it");
                assert!(matches!(ours, Err(DecodeError::Utf8(_) | DecodeError::Json(_))), "{name}: {ours:?}");
            }
            "cesu8" | "nan" => {
                assert!(opt(case, "reserialize_error").is_some(), "{name}: Python reads it, fails to rewrite it");
                assert!(ours.is_err(), "{name}: {ours:?}");
            }
            "array" | "scalar" | "invalid_utf8" => {
                assert!(opt(case, "error").is_some(), "{name}: Python refuses it");
                assert!(ours.is_err(), "{name}: {ours:?}");
            }
            "empty" => {
                assert!(opt(case, "error").is_some() && wire::is_tombstone(Some(&bytes)), "{name}: never read");
            }
            other => panic!("unmapped state_deserialize case {other:?}"),
        }
    }
}
