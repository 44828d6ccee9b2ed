//! Loading and reading the vectors (with the crate's own JSON parser), and the helpers the
//! subjects share: hex, canonical bytes, raw records, Python's names of decode errors, and a
//! recording invalid-message policy.

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use flechtwerk::json::{self, JsonError, Map, Value};
use flechtwerk::wire::{self, DecodeError, Part, RawRecord};
use flechtwerk::{InvalidMessageAction, InvalidMessageError, Record};

fn vectors() -> &'static Value {
    static VECTORS: OnceLock<Value> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/vectors.json");
        let text = std::fs::read_to_string(path).expect("tests/golden/vectors.json is readable");
        json::parse(&text).expect("vectors.json is JSON our parser accepts")
    })
}

pub(crate) fn opt<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(map) => map.get(key),
        other => panic!("expected an object with {key:?}, found {other:?}"),
    }
}

pub(crate) fn field<'v>(v: &'v Value, key: &str) -> &'v Value {
    opt(v, key).unwrap_or_else(|| panic!("missing field {key:?} in {}", show(v)))
}

pub(crate) fn text(v: &Value) -> &str {
    match v {
        Value::Str(s) => s,
        other => panic!("expected a string, found {other:?}"),
    }
}

pub(crate) fn text_of<'v>(v: &'v Value, key: &str) -> &'v str {
    text(field(v, key))
}

pub(crate) fn items(v: &Value) -> &[Value] {
    match v {
        Value::List(items) => items,
        other => panic!("expected a list, found {other:?}"),
    }
}

pub(crate) fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, found {other:?}"),
    }
}

pub(crate) fn number(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        other => panic!("expected a number, found {other:?}"),
    }
}

pub(crate) fn category(name: &str) -> &'static Value {
    field(vectors(), name)
}

pub(crate) fn cases(name: &str) -> &'static [Value] {
    items(category(name))
}

pub(crate) fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit")).collect()
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `*_hex` field: `None` for JSON null (a Kafka null).
pub(crate) fn hex_field(v: &Value, key: &str) -> Option<Vec<u8>> {
    match field(v, key) {
        Value::Null => None,
        other => Some(hex(text(other))),
    }
}

/// A case, shortened for failure messages.
pub(crate) fn show(v: &Value) -> String {
    let mut shown = format!("{v:?}");
    if shown.len() > 600 {
        let cut = (0..=600).rev().find(|&i| shown.is_char_boundary(i)).unwrap_or(0);
        shown.truncate(cut);
        shown.push_str("...");
    }
    shown
}

pub(crate) fn object(text: &str) -> Map {
    match json::parse(text) {
        Ok(Value::Object(map)) => map,
        other => panic!("{text:?} is not a JSON object: {other:?}"),
    }
}

pub(crate) fn canonical(map: &Map) -> Vec<u8> {
    let mut out = Vec::new();
    json::write_object(map, &mut out).expect("finite values encode");
    out
}

pub(crate) fn raw_record(
    topic: &str,
    partition: i32,
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> RawRecord {
    RawRecord {
        topic: Arc::from(topic),
        partition,
        offset,
        timestamp_ms: None,
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers: Vec::new(),
    }
}

/// The Python exception class of a decode error's cause, as the vectors name it.
pub(crate) fn python_cause(error: &DecodeError) -> &'static str {
    match error {
        DecodeError::Utf8(_) => "UnicodeDecodeError",
        // CPython's int-digits limit is a plain ValueError raised inside json.loads.
        DecodeError::Json(JsonError::IntegerTooLong { .. }) => "ValueError",
        DecodeError::Json(_) => "JSONDecodeError",
        DecodeError::NotAnObject { .. } => "ValueError",
    }
}

pub(crate) fn json_variant(error: &JsonError) -> &'static str {
    match error {
        JsonError::NonFiniteLiteral { .. } => "NonFiniteLiteral",
        JsonError::NumberOutOfRange { .. } => "NumberOutOfRange",
        JsonError::InvalidEscape { .. } => "InvalidEscape",
        JsonError::TooDeep { .. } => "TooDeep",
        JsonError::IntegerTooLong { .. } => "IntegerTooLong",
        _ => "other",
    }
}

/// One recorded `on_invalid_message` call: part, topic, partition, offset, Python cause class.
pub(crate) type HookCall = (Part, String, i32, i64, &'static str);

/// A policy that records its calls and answers per the vectors' policy names
/// (`raise` / `skip` / `substitute` with `{"substituted": true}`).
pub(crate) struct RecordingPolicy {
    kind: String,
    calls: Mutex<Vec<HookCall>>,
}

impl RecordingPolicy {
    pub(crate) fn new(kind: &str) -> Self {
        assert!(matches!(kind, "raise" | "skip" | "substitute"), "unknown policy {kind:?}");
        RecordingPolicy { kind: kind.to_owned(), calls: Mutex::new(Vec::new()) }
    }

    pub(crate) fn calls(&self) -> Vec<HookCall> {
        self.calls.lock().unwrap().clone()
    }
}

impl wire::InvalidMessagePolicy for RecordingPolicy {
    fn on_invalid_message(&self, e: &InvalidMessageError) -> InvalidMessageAction {
        self.calls.lock().unwrap().push((
            e.part(),
            e.topic().to_owned(),
            e.partition(),
            e.offset(),
            python_cause(e.decode_error()),
        ));
        match self.kind.as_str() {
            "raise" => InvalidMessageAction::Raise,
            "skip" => InvalidMessageAction::Skip,
            _ => InvalidMessageAction::Substitute(Record::wrap(object(r#"{"substituted":true}"#))),
        }
    }
}

pub(crate) fn part_name(part: Part) -> &'static str {
    match part {
        Part::Key => "key",
        Part::Value => "value",
    }
}
