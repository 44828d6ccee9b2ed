//! Golden vectors from the Python reference implementation: `tests/golden/vectors.json`, written by
//! `tests/golden/generate.py` from flechtwerk 0.17.0 on CPython 3.13.0.
//!
//! Every category that applies to the Rust API is checked case by case: byte-identical where we
//! promise compatibility, and where we deliberately differ, our side is asserted explicitly (so a
//! divergence can neither grow nor vanish unnoticed). `docs/compatibility.md` explains each one.
//! Test names carry the behaviour IDs of `behaviours.md` they pin; failures name the case input.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use chrono::{NaiveDate, NaiveTime, Utc};
use flechtwerk::attribute::{
    dict, list, set, tuple, Attribute, AttributeError, Codec, CodecError, Date, DateTime, Time, UtcOffset, ANY, BOOL,
    DATE, DATETIME, FLOAT, INT, RECORD, STR, TIME,
};
use flechtwerk::json::{self, JsonError, Map, Value};
use flechtwerk::observer::InvalidOutcome;
use flechtwerk::testing::{decode_config_update, ConfigBootstrap};
use flechtwerk::testing::{Observed, RecordingObserver};
use flechtwerk::wire::{self, DecodeError, Part, PolicyError, RaisePolicy, RawRecord};
use flechtwerk::ConfigStore;
use flechtwerk::{
    murmur2, token_for, Config, Event, InvalidMessageAction, InvalidMessageError, Message, Record, State,
};

// ---------------------------------------------------------------------------------------------
// Loading and reading the vectors (with the crate's own JSON parser).

fn vectors() -> &'static Value {
    static VECTORS: OnceLock<Value> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/vectors.json");
        let text = std::fs::read_to_string(path).expect("tests/golden/vectors.json is readable");
        json::parse(&text).expect("vectors.json is JSON our parser accepts")
    })
}

fn opt<'v>(v: &'v Value, key: &str) -> Option<&'v Value> {
    match v {
        Value::Object(map) => map.get(key),
        other => panic!("expected an object with {key:?}, found {other:?}"),
    }
}

fn field<'v>(v: &'v Value, key: &str) -> &'v Value {
    opt(v, key).unwrap_or_else(|| panic!("missing field {key:?} in {}", show(v)))
}

fn text(v: &Value) -> &str {
    match v {
        Value::Str(s) => s,
        other => panic!("expected a string, found {other:?}"),
    }
}

fn text_of<'v>(v: &'v Value, key: &str) -> &'v str {
    text(field(v, key))
}

fn items(v: &Value) -> &[Value] {
    match v {
        Value::List(items) => items,
        other => panic!("expected a list, found {other:?}"),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, found {other:?}"),
    }
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(f) => *f,
        other => panic!("expected a number, found {other:?}"),
    }
}

fn category(name: &str) -> &'static Value {
    field(vectors(), name)
}

fn cases(name: &str) -> &'static [Value] {
    items(category(name))
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd hex {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit")).collect()
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `*_hex` field: `None` for JSON null (a Kafka null).
fn hex_field(v: &Value, key: &str) -> Option<Vec<u8>> {
    match field(v, key) {
        Value::Null => None,
        other => Some(hex(text(other))),
    }
}

/// A case, shortened for failure messages.
fn show(v: &Value) -> String {
    let mut shown = format!("{v:?}");
    if shown.len() > 600 {
        let cut = (0..=600).rev().find(|&i| shown.is_char_boundary(i)).unwrap_or(0);
        shown.truncate(cut);
        shown.push_str("...");
    }
    shown
}

fn object(text: &str) -> Map {
    match json::parse(text) {
        Ok(Value::Object(map)) => map,
        other => panic!("{text:?} is not a JSON object: {other:?}"),
    }
}

fn canonical(map: &Map) -> Vec<u8> {
    let mut out = Vec::new();
    json::write_object(map, &mut out).expect("finite values encode");
    out
}

fn raw_record(topic: &str, partition: i32, offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> RawRecord {
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
fn python_cause(error: &DecodeError) -> &'static str {
    match error {
        DecodeError::Utf8(_) => "UnicodeDecodeError",
        // CPython's int-digits limit is a plain ValueError raised inside json.loads.
        DecodeError::Json(JsonError::IntegerTooLong { .. }) => "ValueError",
        DecodeError::Json(_) => "JSONDecodeError",
        DecodeError::NotAnObject { .. } => "ValueError",
    }
}

fn json_variant(error: &JsonError) -> &'static str {
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
type HookCall = (Part, String, i32, i64, &'static str);

/// A policy that records its calls and answers per the vectors' policy names
/// (`raise` / `skip` / `substitute` with `{"substituted": true}`).
struct RecordingPolicy {
    kind: String,
    calls: Mutex<Vec<HookCall>>,
}

impl RecordingPolicy {
    fn new(kind: &str) -> Self {
        assert!(matches!(kind, "raise" | "skip" | "substitute"), "unknown policy {kind:?}");
        RecordingPolicy { kind: kind.to_owned(), calls: Mutex::new(Vec::new()) }
    }

    fn calls(&self) -> Vec<HookCall> {
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

fn part_name(part: Part) -> &'static str {
    match part {
        Part::Key => "key",
        Part::Value => "value",
    }
}

// ---------------------------------------------------------------------------------------------
// canonical_json, float_repr

/// Inputs Python's strict decoder accepts (failing only when the value is encoded again) or that
/// crash it with a RecursionError outside the hook, and that we reject at decode time instead,
/// with this error.
fn decode_time_divergence(name: &str) -> Option<&'static str> {
    Some(match name {
        "nan_literal" | "infinity_literal" | "neg_infinity_literal" | "nan_nested" => "NonFiniteLiteral",
        "float_1E400_inf" | "float_neg_1e400_inf" | "float_2e308_inf" => "NumberOutOfRange",
        "lone_high_surrogate_escape"
        | "lone_low_surrogate_escape"
        | "lone_surrogate_in_key"
        | "reversed_surrogate_pair" => "InvalidEscape",
        "nested_depth_600" | "nested_depth_1000" | "nested_depth_100000" => "TooDeep",
        _ => return None,
    })
}

/// ATTR-43 (canonical bytes), INV-02 (strict value decoding), CFG-03 (the store re-encodes).
#[test]
fn attr_43_inv_02_canonical_json_matches_python() {
    let mut divergent = BTreeSet::new();
    for case in cases("canonical_json") {
        let name = text_of(case, "name");
        let input = hex(text_of(case, "input_hex"));
        let shown = opt(case, "input_text").map_or_else(|| format!("{name} ({} bytes)", input.len()), show);
        let decoded = wire::decode_value(Some(&input));
        if let Some(ok) = opt(case, "ok") {
            let want = hex(text(ok));
            let map = decoded.unwrap_or_else(|e| panic!("{shown}: Python decodes, we fail: {e}"));
            assert_eq!(to_hex(&canonical(&map)), to_hex(&want), "{shown}: canonical bytes");
            // The config store's fast path (canonical bytes stored as they are) agrees.
            assert_eq!(
                flechtwerk::testing::check_canonical_object(&input),
                Ok(input == want),
                "{shown}: canonical scan"
            );
            let mut store = ConfigStore::new();
            store.put_bytes("k", &input).unwrap_or_else(|e| panic!("{shown}: put_bytes: {e}"));
            assert_eq!(store.get_bytes("k"), Some(&want[..]), "{shown}: stored bytes");
            continue;
        }
        let error = field(case, "error");
        let (kind, stage, message) = (text_of(error, "type"), text_of(error, "stage"), text_of(error, "message"));
        if let Some(variant) = decode_time_divergence(name) {
            // Deliberate: Python accepts these at decode (or crashes outside the hook); we reject.
            assert!(stage == "encode" || kind == "RecursionError", "{shown}: not a divergence any more: {error:?}");
            match decoded {
                Err(DecodeError::Json(e)) => assert_eq!(json_variant(&e), variant, "{shown}: {e}"),
                other => panic!("{shown}: expected a {variant} decode error, got {other:?}"),
            }
            divergent.insert(name);
            continue;
        }
        assert_eq!(stage, "decode", "{shown}: Python fails at encode but we have no divergence listed");
        let err = decoded.err().unwrap_or_else(|| panic!("{shown}: Python rejects ({kind}: {message}), we accept"));
        let want = if message.starts_with("JSON value decoded to") { "ValueError" } else { kind };
        assert_eq!(python_cause(&err), want, "{shown}: error category ({message}; ours: {err})");
    }
    assert_eq!(divergent.len(), 14, "every listed divergence occurs: {divergent:?}");
}

/// ATTR-43: floats are written as Python's `repr`, and read back to the same bits.
#[test]
fn attr_43_float_repr_matches_python() {
    for case in cases("float_repr") {
        let bits = u64::from_str_radix(text_of(case, "bits_hex"), 16).expect("hex bits");
        let value = f64::from_bits(bits);
        let want = text_of(case, "json");
        let mut out = Vec::new();
        json::write_float(value, &mut out).expect("finite");
        assert_eq!(String::from_utf8(out).unwrap(), want, "float bits {bits:016x}");
        assert_eq!(json::parse(want), Ok(Value::Float(value)), "{want} reads back");
    }
}

// ---------------------------------------------------------------------------------------------
// value_decode, key_decode, is_tombstone

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

// ---------------------------------------------------------------------------------------------
// token_for

/// EXT-30: `token_for` is Kafka's default partitioner, bit for bit.
#[test]
fn ext_30_token_for_matches_python_and_kafka() {
    let token = category("token_for");
    for case in items(field(token, "cases")) {
        let key = text_of(case, "key");
        assert_eq!(to_hex(key.as_bytes()), text_of(case, "key_hex"), "{key:?}: UTF-8 bytes");
        let hash = murmur2(key.as_bytes());
        assert_eq!(i64::from(hash), int(field(case, "murmur2_signed")), "{key:?}: murmur2");
        assert_eq!(i64::from(hash as u32), int(field(case, "murmur2_unsigned")), "{key:?}: unsigned");
        assert_eq!(i64::from(hash & 0x7fff_ffff), int(field(case, "positive")), "{key:?}: positive");
        let Value::Object(tokens) = field(case, "token_for") else { panic!("token_for map") };
        for (n, want) in tokens {
            let n: u32 = n.parse().expect("token count");
            assert_eq!(i64::from(token_for(key, n)), int(want), "token_for({key:?}, {n})");
        }
    }
    for case in items(field(field(token, "kafka_utils_test_murmur2"), "cases")) {
        let key = text_of(case, "key");
        assert_eq!(i64::from(murmur2(key.as_bytes())), int(field(case, "murmur2_signed")), "Kafka UtilsTest {key:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// DATETIME, DATE, TIME

fn local(fields: &[Value]) -> chrono::NaiveDateTime {
    let f: Vec<i64> = fields.iter().map(int).collect();
    NaiveDate::from_ymd_opt(f[0] as i32, f[1] as u32, f[2] as u32)
        .and_then(|d| d.and_hms_micro_opt(f[3] as u32, f[4] as u32, f[5] as u32, f[6] as u32))
        .unwrap_or_else(|| panic!("fields {f:?}"))
}

/// A Python ValueError from `fromisoformat` against ours: the same verdict and, for range
/// errors, the same text.
fn assert_same_rejection(input: &str, error: &Value, ours: Result<(), CodecError>) {
    assert_eq!(text_of(error, "type"), "ValueError", "{input:?}");
    let message = text_of(error, "message");
    match ours {
        Err(CodecError::Temporal(e)) => {
            let want = (!message.starts_with("Invalid isoformat string")).then_some(message);
            assert_eq!(e.reason(), want, "{input:?}");
        }
        other => panic!("{input:?}: Python rejects ({message}), ours {other:?}"),
    }
}

fn encoded<V>(codec: &dyn Codec<V>, value: &V) -> String {
    match codec.encode(value) {
        Ok(Value::Str(s)) => s,
        other => panic!("encode gave {other:?}"),
    }
}

/// ATTR-12: DATETIME decodes what CPython 3.13's `datetime.fromisoformat` decodes and encodes
/// like the Python encoder, `Z` for UTC.
#[test]
fn attr_12_datetime_matches_python() {
    let datetime = category("datetime");
    for case in items(field(datetime, "decode_then_encode")) {
        let input = text_of(case, "input");
        let decoded = DATETIME.decode(&Value::Str(input.to_owned()));
        let Some(want) = opt(case, "encoded") else {
            assert_same_rejection(input, field(case, "error"), decoded.map(|_| ()));
            continue;
        };
        let value = decoded.unwrap_or_else(|e| panic!("{input:?}: Python decodes, ours: {e}"));
        assert_eq!(encoded(&DATETIME, &value), text(want), "{input:?}");
        let fields = field(case, "decoded");
        let offset = opt(fields, "utcoffset_seconds").filter(|v| **v != Value::Null).map(number);
        assert_eq!(
            value.offset().map(UtcOffset::as_micros),
            offset.map(|s| (s * 1e6).round() as i64),
            "{input:?}: offset"
        );
        assert_eq!(i64::from(value.local().and_utc().timestamp_subsec_micros()), int(field(fields, "microsecond")));
    }

    let mut divergent = 0;
    for case in items(field(datetime, "encode")) {
        let label = text_of(case, "tz_label");
        let want = text_of(case, "encoded");
        let tzname = opt(case, "tzname").filter(|v| **v != Value::Null).map(text);
        let local = local(items(field(case, "fields")));
        let offset_seconds = match field(case, "tz") {
            Value::Null => None,
            tz => Some(match (text_of(tz, "kind"), tzname) {
                ("timezone.utc", _) => 0.0,
                ("fixed", _) => number(field(tz, "offset_seconds")),
                ("zoneinfo", Some("UTC" | "GMT")) => 0.0,
                ("zoneinfo", Some("BST" | "CET")) => 3600.0,
                ("zoneinfo", Some("CEST")) => 7200.0,
                other => panic!("{label}: no offset known for {other:?}"),
            }),
        };
        let value = match offset_seconds {
            None => DateTime::Naive(local),
            Some(s) => DateTime::aware(local, UtcOffset::from_micros((s * 1e6).round() as i64).expect("offset")),
        };
        let ours = encoded(&DATETIME, &value);
        let zero = offset_seconds == Some(0.0);
        if zero && tzname != Some("UTC") {
            // Divergence: a zero-offset zone not named UTC (GMT, Europe/London in winter, a zone
            // named "Z") writes +00:00 in Python; an offset cannot carry the name, we write Z.
            assert_eq!(ours, want.replace("+00:00", "Z"), "{label} {local}");
            divergent += 1;
        } else if tzname == Some("UTC") && !zero && want.contains('Z') {
            // Divergence: Python's textual replace turns `+00:00:30` of a zone *named* UTC into `Z:30`.
            assert_eq!(ours, want.replace('Z', "+00:00"), "{label} {local}");
            divergent += 1;
        } else {
            assert_eq!(ours, want, "{label} {local}");
        }
    }
    assert_eq!(divergent, 17, "GMT, 'Z'-named, London winter and UTC-named +30 s cases");
}

/// ATTR-13: DATE ⇄ `YYYY-MM-DD` as Python's `date.fromisoformat` / `isoformat`.
#[test]
fn attr_13_date_matches_python() {
    let date = category("date");
    for case in items(field(date, "decode_then_encode")) {
        let input = text_of(case, "input");
        let decoded = DATE.decode(&Value::Str(input.to_owned()));
        match opt(case, "encoded") {
            Some(want) => {
                let value = decoded.unwrap_or_else(|e| panic!("{input:?}: Python decodes, ours: {e}"));
                assert_eq!(encoded(&DATE, &value), text(want), "{input:?}");
            }
            None => assert_same_rejection(input, field(case, "error"), decoded.map(|_| ())),
        }
    }
    for case in items(field(date, "encode")) {
        let Some(fields) = opt(case, "fields") else {
            // `DATE.encode(datetime(...))`: Python has no exact-type check; a Rust `Date` is a date.
            continue;
        };
        let f: Vec<i64> = items(fields).iter().map(int).collect();
        let value: Date = NaiveDate::from_ymd_opt(f[0] as i32, f[1] as u32, f[2] as u32).expect("date");
        assert_eq!(encoded(&DATE, &value), text_of(case, "encoded"), "{f:?}");
    }
}

/// ATTR-13: TIME ⇄ ISO time as Python's `time.fromisoformat` / `isoformat`, never `Z`.
#[test]
fn attr_13_time_matches_python() {
    let time = category("time");
    for case in items(field(time, "decode_then_encode")) {
        let input = text_of(case, "input");
        let decoded = TIME.decode(&Value::Str(input.to_owned()));
        match opt(case, "encoded") {
            Some(want) => {
                let value = decoded.unwrap_or_else(|e| panic!("{input:?}: Python decodes, ours: {e}"));
                assert_eq!(encoded(&TIME, &value), text(want), "{input:?}");
            }
            None => assert_same_rejection(input, field(case, "error"), decoded.map(|_| ())),
        }
    }
    for case in items(field(time, "encode")) {
        let label = text_of(case, "tz_label");
        let f: Vec<i64> = items(field(case, "fields")).iter().map(int).collect();
        let clock = NaiveTime::from_hms_micro_opt(f[0] as u32, f[1] as u32, f[2] as u32, f[3] as u32).expect("time");
        let offset = match label {
            "naive" => None,
            "timezone.utc" | "ZoneInfo('UTC')" => Some(UtcOffset::UTC),
            "timezone(timedelta(hours=-5,minutes=-30))" => UtcOffset::from_seconds(-19_800),
            other => panic!("no offset known for {other}"),
        };
        let want = opt(case, "encoded").map(text).unwrap_or_else(|| panic!("{label} {f:?}: Python error"));
        assert_eq!(encoded(&TIME, &Time::new(clock, offset)), want, "{label} {f:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// SET / ANY encoding, codec errors

fn strings(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn ymd(y: i32, m: u32, d: u32) -> Date {
    NaiveDate::from_ymd_opt(y, m, d).expect("date")
}

/// ATTR-14: SET encodes sorted by raw value; LIST / TUPLE / DICT element-wise.
#[test]
fn attr_14_set_encode_matches_python() {
    for case in cases("set_encode") {
        let (codec, input) = (text_of(case, "codec"), text_of(case, "input_py"));
        let want = opt(case, "ok_json").map(|j| json::parse(text(j)).expect("ok_json"));
        let ours: Result<Value, CodecError> = match (codec, input) {
            ("SET(STR)", "{'z','x'}") => set(STR).encode(&strings(&["z", "x"])),
            ("SET(STR)", "set()") => set(STR).encode(&BTreeSet::new()),
            ("SET(STR)", _) if input.starts_with("{'b','a'") => {
                set(STR).encode(&strings(&["b", "a", "B", "A", "", " ", "\u{e4}", "\u{1f600}", "\u{ffff}", "10", "9"]))
            }
            ("SET(INT)", "{10, 9, -1, 0, 2**64, -2**63}") => {
                // 2**64 does not fit INT's i64: compare the rest, in order.
                let ours = set(INT).encode(&BTreeSet::from([10, 9, -1, 0, i64::MIN])).unwrap();
                let Some(Value::List(want)) = want else { panic!("{input}: list") };
                let want: Vec<Value> = want.into_iter().filter(|v| !matches!(v, Value::BigInt(_))).collect();
                assert_eq!(ours, Value::List(want), "{codec} {input}");
                continue;
            }
            ("SET(DATE)", _) => set(DATE).encode(&BTreeSet::from([ymd(2024, 6, 15), ymd(2023, 1, 1)])),
            ("SET(STR).decode", "['b','a','b']") => {
                set(STR).decode(&json::parse(r#"["b","a","b"]"#).unwrap()).and_then(|s| set(STR).encode(&s))
            }
            ("TUPLE(INT)", "(3,1,2)") => tuple(INT).encode(&vec![3, 1, 2].into_boxed_slice()),
            ("DICT(INT)", "{'b':2,'a':1}") => dict(INT).encode(&BTreeMap::from([("b".into(), 2), ("a".into(), 1)])),
            // Not expressible in Rust, so nothing to compare: SET(FLOAT) needs an ordered element
            // type (f64 is not Ord), and wrongly typed elements (`{1.0, 2}`, `{True, 2}`, a LIST(STR)
            // of ints) or a list with duplicates passed as a set do not type-check.
            ("SET(FLOAT)" | "LIST(STR)", _) | ("SET(INT)", "{True, 2} (bool inside)") => continue,
            ("SET(STR)", "['b','a','b'] (list, duplicates)") => continue,
            other => panic!("unmapped set_encode case {other:?}: extend this test"),
        };
        let want = want.unwrap_or_else(|| panic!("{codec} {input}: Python fails: {:?}", opt(case, "error")));
        assert_eq!(ours.unwrap_or_else(|e| panic!("{codec} {input}: {e}")), want, "{codec} {input}");
    }
}

/// ATTR-16 / STO-04: what ANY-encoded Python values become on the wire, built from the Rust
/// codecs (ANY itself is a pass-through of JSON values in Rust).
#[test]
fn attr_16_any_encode_matches_python() {
    let dt = |us| NaiveDate::from_ymd_opt(2024, 6, 15).unwrap().and_hms_micro_opt(14, 30, 45, us).unwrap();
    for case in cases("any_encode") {
        let input = text_of(case, "input_py");
        let mut map = Map::new();
        let mut put = |key: &str, value: Result<Value, CodecError>| {
            map.insert(key.to_owned(), value.unwrap_or_else(|e| panic!("{input}: {e}")));
        };
        match input {
            "None" => {
                assert_eq!(ANY.encode(&Value::Null), Ok(Value::Null));
                continue;
            }
            "{'s': {3, 1, 2}}" => put("s", set(INT).encode(&BTreeSet::from([3, 1, 2]))),
            "{'t': (3, 'x', None)}" => put("t", ANY.encode(&json::parse(r#"[3,"x",null]"#).unwrap())),
            "{'dt': datetime(2024,6,15,14,30,45,123000,utc)}" => {
                put("dt", DATETIME.encode(&DateTime::utc(dt(123_000))))
            }
            "{'dt': datetime(2024,6,15,14,30,45)} naive" => put("dt", DATETIME.encode(&DateTime::Naive(dt(0)))),
            "{'d': date(2024,6,15)}" => put("d", DATE.encode(&ymd(2024, 6, 15))),
            "{'t': time(13,30,tzinfo=utc)}" => {
                put("t", TIME.encode(&Time::new(NaiveTime::from_hms_opt(13, 30, 0).unwrap(), Some(UtcOffset::UTC))))
            }
            "[{ 'nested': [set(['b','a']), (1,(2,3))] }]" => {
                let nested = Value::List(vec![
                    set(STR).encode(&strings(&["b", "a"])).unwrap(),
                    json::parse("[1,[2,3]]").unwrap(),
                ]);
                let value = Value::List(vec![Value::Object(Map::from([("nested".to_owned(), nested)]))]);
                let want = json::parse(r#"[{"nested":[["a","b"],[1,[2,3]]]}]"#).unwrap();
                assert_eq!(text_of(case, "any_encode"), "[{'nested': [['a', 'b'], [1, [2, 3]]]}]");
                assert_eq!(ANY.encode(&value), Ok(want), "{input}");
                continue;
            }
            "{'r': Record.wrap({'b':1,'a':[1,2]})}" => {
                put("r", RECORD.encode(&Record::wrap(object(r#"{"b":1,"a":[1,2]}"#))))
            }
            "{'dates': {date(2024,1,2), date(2023,5,6)}}" => {
                put("dates", set(DATE).encode(&BTreeSet::from([ymd(2024, 1, 2), ymd(2023, 5, 6)])))
            }
            "{'f': 1.5, 'i': 2**70, 'bool': True}" => {
                put("f", FLOAT.encode(&1.5));
                put("i", ANY.encode(&json::parse("1180591620717411303424").unwrap()));
                put("bool", BOOL.encode(&true));
            }
            "{'nan': float('nan')}" => {
                // Divergence: Python's ANY passes NaN and the send fails; ours refuses it at write time.
                assert!(opt(case, "wire_error").is_some(), "{input}");
                assert!(matches!(ANY.encode(&Value::Float(f64::NAN)), Err(CodecError::NonFinite { .. })));
                assert!(matches!(FLOAT.encode(&f64::NAN), Err(CodecError::NonFinite { .. })));
                continue;
            }
            // Python rejects these at run time; in Rust they do not type-check: no encoder for
            // timedelta / bytes / ZoneInfo / frozenset / mixed-type sets, and map keys are String.
            "{'mixed_set': {1, 'a'}}"
            | "{'td': timedelta(seconds=5)}"
            | "{'b': b'xy'}"
            | "{'z': ZoneInfo('UTC')}"
            | "{'k': {1: 'int key'}}"
            | "{'k': {MyStr('s'): 1}} (str subclass key)"
            | "{'fs': frozenset({1})}" => {
                assert!(opt(case, "any_encode_error").is_some(), "{input}");
                continue;
            }
            other => panic!("unmapped any_encode case {other:?}: extend this test"),
        }
        let wire = Record::wrap(map).encode().unwrap();
        assert_eq!(to_hex(&wire), text_of(case, "wire_hex"), "{input}: {}", String::from_utf8_lossy(&wire));
    }
}

/// ATTR-02, ATTR-06, ATTR-11, ATTR-12/13, ATTR-14: every codec failure Python raises that the
/// Rust API can express is also a failure here (at the error-kind level).
#[test]
fn attr_11_codec_errors_match_python() {
    const N: Attribute<i64> = Attribute::new("n", &INT);
    const N_OPTIONAL: Attribute<i64> = Attribute::optional("n", &INT);
    let p = |text: &str| json::parse(text).unwrap();
    for case in cases("codec_errors") {
        let expr = text_of(case, "expr");
        let rejected = |ours: bool| assert!(ours, "{expr}: Python raises {:?}, we accept", opt(case, "error"));
        match expr {
            "INT.decode(True)" => rejected(INT.decode(&Value::Bool(true)).is_err()),
            "INT.decode(1.0)" => rejected(INT.decode(&Value::Float(1.0)).is_err()),
            "FLOAT.decode(1)" => rejected(FLOAT.decode(&Value::Int(1)).is_err()),
            "STR.decode(1)" => rejected(STR.decode(&Value::Int(1)).is_err()),
            "STR.decode(None)" => rejected(STR.decode(&Value::Null).is_err()),
            "BOOL.decode(0)" => rejected(BOOL.decode(&Value::Int(0)).is_err()),
            "BOOL.decode('true')" => rejected(BOOL.decode(&Value::Str("true".into())).is_err()),
            "DICT(STR).decode({'k': 1})" => rejected(dict(STR).decode(&p(r#"{"k":1}"#)).is_err()),
            "LIST(INT).decode([1, 'x'])" => rejected(list(INT).decode(&p(r#"[1,"x"]"#)).is_err()),
            "LIST(INT).decode('ab')" => rejected(list(INT).decode(&p(r#""ab""#)).is_err()),
            "DATETIME.decode(1)" => rejected(DATETIME.decode(&Value::Int(1)).is_err()),
            "DATETIME.decode('bad')" => rejected(DATETIME.decode(&Value::Str("bad".into())).is_err()),
            "DATE.decode('2024-02-30')" | "TIME.decode('25:00')" => {
                let input = expr.split('\'').nth(1).unwrap();
                let ours = if expr.starts_with("DATE") {
                    DATE.decode(&Value::Str(input.into())).map(|_| ())
                } else {
                    TIME.decode(&Value::Str(input.into())).map(|_| ())
                };
                assert_same_rejection(input, field(case, "error"), ours);
            }
            "Record()[Attribute('n', INT)] = None" => {
                let err = Record::new().set(&N, None).unwrap_err();
                assert_eq!(err, AttributeError::RequiredNone { name: "n" });
                assert!(err.to_string().contains("cannot assign None to required"), "{err}");
            }
            "Record.wrap({'n': None})[Attribute('n', INT)]" => {
                let record = Record::wrap(object(r#"{"n":null}"#));
                assert_eq!(record.require(&N), Err(AttributeError::Missing { name: "n" }));
            }
            "Record.wrap({})[Attribute('n', INT, optional=True)]" => {
                assert_eq!(Record::new().require(&N_OPTIONAL), Err(AttributeError::Missing { name: "n" }));
            }
            "del Record()[Attribute('n', INT)]" => rejected(Record::new().delete(&N).is_err()),
            "Record().pop(Attribute('n', INT))" => {
                // Divergence: Python's pop without default raises KeyError; our `take` is pop with
                // a None default.
                assert_eq!(Record::new().take(&N), Ok(None));
            }
            "Record().raw['x'] = 1" => {
                // Divergence: Python's raw is read-only; ours has an explicit `raw_mut`.
                let mut record = Record::new();
                record.raw_mut().insert("x".into(), Value::Int(1));
                assert_eq!(record.len(), 1);
            }
            "repr(Attribute('count', INT))" | "repr(Attribute('count', INT, optional=True))" => {
                // Divergence (text only): Rust Debug quotes with `"` and writes `optional`.
                const COUNT: Attribute<i64> = Attribute::new("count", &INT);
                const COUNT_OPTIONAL: Attribute<i64> = Attribute::optional("count", &INT);
                let ours = if expr.contains("optional") { format!("{COUNT_OPTIONAL:?}") } else { format!("{COUNT:?}") };
                let python = text_of(case, "ok_repr").trim_matches('"').to_owned();
                assert_eq!(ours.replace('"', "'").replace(", optional)", ", optional=True)"), python, "{expr}");
            }
            // No Rust counterpart: these are type errors at compile time (wrong value types,
            // `str` subclasses, string indexes, positional `optional`, sealed Attribute, raw dicts
            // as payloads), or codecs the crate does not have yet (BYTES, ZONE_INFO).
            "INT.encode(True)"
            | "FLOAT.encode(1)"
            | "STR.encode(MyStr('x'))"
            | "DICT(STR).encode({1: 'a'})"
            | "DICT(STR).encode({MyStr('k'): 'a'})"
            | "DICT(STR).encode({'k': 1})"
            | "DATETIME.encode(date(2024,6,15))"
            | "TIME.encode(timedelta(1))"
            | "ANY.encode(timedelta(seconds=5))"
            | "ANY.encode(b'x')"
            | "Attribute('c', INT, True)"
            | "Record()['n'] (string index)"
            | "class X(Attribute) outside module"
            | "encode_json({'a': 1}) (raw dict)"
            | "encode_json(1)" => {}
            _ if expr.starts_with("BYTES.") || expr.starts_with("ZONE_INFO.") => {}
            other => panic!("unmapped codec_errors case {other:?}: extend this test"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Messages and the invalid-message hook

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

// ---------------------------------------------------------------------------------------------
// Config store scenarios

const ENRICHED: Attribute<bool> = Attribute::new("enriched", &BOOL);

/// The scenario's `enrich_config`: identity, or `config[ENRICHED] = True`.
fn enrich(kind: &str, config: Config) -> Config {
    match kind {
        "identity" => config,
        "flag" => config.with(&ENRICHED, true).unwrap(),
        other => panic!("unknown enrich {other:?}"),
    }
}

/// What one scenario produced, in the vectors' terms.
#[derive(Debug, Default)]
struct ScenarioOutcome {
    /// key, topic, partition, offset, value hex (None for a tombstone)
    returned: Vec<(String, String, i32, i64, Option<String>)>,
    error: Option<PolicyError>,
    store: BTreeMap<String, String>,
    nbytes: usize,
}

/// The records in the order `FakeKafkaConsumer.getmany` delivers them: grouped by
/// topic-partition, groups in order of first appearance.
fn fetch_order(case: &Value) -> Vec<RawRecord> {
    let mut groups: Vec<((String, i32), Vec<RawRecord>)> = Vec::new();
    for r in items(field(case, "records")) {
        let tp = (text_of(r, "topic").to_owned(), int(field(r, "partition")) as i32);
        let record = raw_record(
            &tp.0,
            tp.1,
            int(field(r, "offset")),
            hex_field(r, "key_hex").as_deref(),
            hex_field(r, "value_hex").as_deref(),
        );
        match groups.iter_mut().find(|(g, _)| *g == tp) {
            Some((_, records)) => records.push(record),
            None => groups.push((tp, vec![record])),
        }
    }
    groups.into_iter().flat_map(|(_, records)| records).collect()
}

fn returned(key: &str, record: &RawRecord, value: Option<&Map>) -> (String, String, i32, i64, Option<String>) {
    (key.to_owned(), record.topic.to_string(), record.partition, record.offset, value.map(|m| to_hex(&canonical(m))))
}

fn finish(outcome: &mut ScenarioOutcome, store: &ConfigStore) {
    for key in store.keys() {
        let bytes = store.get_bytes(&key).expect("listed key");
        outcome.nbytes += key.len() + bytes.len();
        outcome.store.insert(key, to_hex(bytes));
    }
}

/// Bootstrap: offer every record, then decide each survivor; identity enrichment takes
/// `apply_unenriched` (the fast path), flag enrichment decodes, enriches and stores.
fn run_bootstrap(case: &Value, policy: &RecordingPolicy, observer: &RecordingObserver) -> ScenarioOutcome {
    let enrich_kind = text_of(case, "enrich");
    let mut outcome = ScenarioOutcome::default();
    let mut bootstrap = ConfigBootstrap::new();
    for record in fetch_order(case) {
        if let Err(e) = bootstrap.offer(&record, policy, observer) {
            outcome.error = Some(e);
            break;
        }
    }
    let mut applied = Vec::new(); // identity: the returned value is read back from the store
    while outcome.error.is_none() {
        let Some(survivor) = bootstrap.next_survivor() else { break };
        let result = if enrich_kind == "identity" {
            bootstrap.apply_unenriched(&survivor, policy, observer).map(|stored| {
                if stored {
                    applied.push(survivor.clone());
                }
            })
        } else {
            flechtwerk::testing::decode_value_with(&survivor.record, policy, observer).map(|decoded| {
                if let Some(map) = decoded {
                    outcome.returned.push(returned(&survivor.key, &survivor.record, Some(&map)));
                    bootstrap.put(&survivor.key, &enrich(enrich_kind, Config::wrap(map))).unwrap();
                }
            })
        };
        if let Err(e) = result {
            outcome.error = Some(e);
        }
    }
    // After a crash the remaining survivors are never applied (Python's bootstrap stops too).
    while bootstrap.next_survivor().is_some() {}
    let store = bootstrap.finish();
    for survivor in &applied {
        let map = wire::decode_value(store.get_bytes(&survivor.key)).expect("stored bytes decode");
        outcome.returned.push(returned(&survivor.key, &survivor.record, Some(&map)));
    }
    finish(&mut outcome, &store);
    outcome
}

/// Bootstrap as the runner does it for a stage that does not enrich: canonical values settled
/// on offer, the rest decided in one call. The error as its text.
fn run_settled_bootstrap(
    case: &Value,
    policy: &RecordingPolicy,
    observer: &RecordingObserver,
) -> Result<ConfigStore, String> {
    let mut bootstrap = ConfigBootstrap::new().without_enrichment();
    for record in fetch_order(case) {
        bootstrap.offer(&record, policy, observer).map_err(|e| e.to_string())?;
    }
    bootstrap.finish_unenriched(policy, observer).map_err(|e| e.to_string())
}

/// Drain: each record through `decode_config_update`, then delete or enrich-and-put.
fn run_drain(case: &Value, policy: &RecordingPolicy, observer: &RecordingObserver) -> ScenarioOutcome {
    let mut outcome = ScenarioOutcome::default();
    let mut store = ConfigStore::new();
    let Value::Object(initial) = field(case, "initial_store_json") else { panic!("initial store") };
    for (key, value) in initial {
        store.put_bytes(key, text(value).as_bytes()).unwrap();
    }
    for record in fetch_order(case) {
        match decode_config_update(&record, policy, observer) {
            Err(e) => {
                outcome.error = Some(e);
                break;
            }
            Ok(None) => {} // skipped by the policy: not applied, not returned
            Ok(Some((key, None))) => {
                store.delete(&key);
                outcome.returned.push(returned(&key, &record, None));
            }
            Ok(Some((key, Some(map)))) => {
                outcome.returned.push(returned(&key, &record, Some(&map)));
                store.put(&key, &enrich(text_of(case, "enrich"), Config::wrap(map))).unwrap();
            }
        }
    }
    finish(&mut outcome, &store);
    outcome
}

/// CFG-01, CFG-03, CFG-12..14, CFG-20..22, INV-11..13, INV-17, INV-19, INV-20: the config store
/// scenarios, bootstrap and drain, give Python's store, return value and hook calls.
#[test]
fn cfg_12_cfg_20_inv_19_config_store_scenarios_match_python() {
    for case in cases("config_store") {
        let name = text_of(case, "name");
        let policy = RecordingPolicy::new(text_of(case, "policy"));
        let observer = RecordingObserver::default();
        let outcome = match text_of(case, "phase") {
            "bootstrap" => run_bootstrap(case, &policy, &observer),
            "drain" => run_drain(case, &policy, &observer),
            other => panic!("{name}: unknown phase {other:?}"),
        };
        let calls = policy.calls();

        if text_of(case, "phase") == "bootstrap" && text_of(case, "enrich") == "identity" {
            // A stage that does not enrich settles canonical values as they are offered; the
            // store, the hook calls and the crash are the same as deciding every survivor.
            let settled_policy = RecordingPolicy::new(text_of(case, "policy"));
            let settled = run_settled_bootstrap(case, &settled_policy, &RecordingObserver::default());
            assert_eq!(settled_policy.calls(), calls, "{name}: settled bootstrap, hook calls");
            match settled {
                Ok(store) => {
                    assert!(outcome.error.is_none(), "{name}: settled bootstrap did not crash");
                    let mut settled_outcome = ScenarioOutcome::default();
                    finish(&mut settled_outcome, &store);
                    assert_eq!(settled_outcome.store, outcome.store, "{name}: settled bootstrap, store");
                }
                Err(e) => assert_eq!(
                    Some(e),
                    outcome.error.as_ref().map(ToString::to_string),
                    "{name}: settled bootstrap, error"
                ),
            }
        }

        // Every hook call is counted with its outcome (INV-20).
        let want_outcome = match text_of(case, "policy") {
            "raise" => InvalidOutcome::Raised,
            "skip" => InvalidOutcome::Skipped,
            _ => InvalidOutcome::Substituted,
        };
        let counted: Vec<Observed> =
            calls.iter().map(|c| Observed::MessageInvalid { topic: c.1.clone(), outcome: want_outcome }).collect();
        assert_eq!(observer.events(), counted, "{name}: counted hook calls");

        if name.contains("_crashes_at_store_put") {
            // Divergence (mixed-fleet hazard 1): Python decodes NaN, infinities and lone
            // surrogates, never asks the hook, then crashes at the store put whatever the policy
            // (bootstrap and drain alike). We reject them at decode, so the policy decides: skip
            // leaves the store as it was, raise raises the InvalidMessageError.
            let error = opt(case, "error").unwrap_or_else(|| panic!("{name}: Python crashes"));
            assert!(matches!(text_of(error, "type"), "ValueError" | "UnicodeEncodeError"), "{name}: {error:?}");
            assert!(items(field(case, "hook_calls")).is_empty(), "{name}: Python never asks the hook");
            let record = fetch_order(case).pop().unwrap();
            assert_eq!(
                calls,
                [(Part::Value, "cfg".to_owned(), 0, record.offset, "JSONDecodeError")],
                "{name}: we ask the hook once"
            );
            let Value::Object(initial) = field(case, "initial_store_json") else { panic!("{name}: initial store") };
            let initial: BTreeMap<String, String> =
                initial.iter().map(|(k, v)| (k.clone(), to_hex(text(v).as_bytes()))).collect();
            assert_eq!(outcome.store, initial, "{name}: the store is unchanged");
            assert!(outcome.returned.is_empty(), "{name}");
            match text_of(case, "policy") {
                "skip" => assert!(outcome.error.is_none(), "{name}: {:?}", outcome.error),
                _ => assert!(matches!(outcome.error, Some(PolicyError::Raised(_))), "{name}: {:?}", outcome.error),
            }
            continue;
        }

        let want_returned: Vec<_> = opt(case, "returned")
            .map(items)
            .unwrap_or_default()
            .iter()
            .map(|r| {
                (
                    text_of(r, "key").to_owned(),
                    text_of(r, "topic").to_owned(),
                    int(field(r, "partition")) as i32,
                    int(field(r, "offset")),
                    match field(r, "value_hex") {
                        Value::Null => None,
                        v => Some(text(v).to_owned()),
                    },
                )
            })
            .collect();
        if opt(case, "error").is_none() {
            // (A crashed Python bootstrap returns nothing; only the store state is comparable.)
            assert_eq!(outcome.returned, want_returned, "{name}: returned records");
        }

        let Value::Object(want_store) = field(case, "store") else { panic!("{name}: store") };
        let want_store: BTreeMap<String, String> =
            want_store.iter().map(|(k, v)| (k.clone(), text(v).to_owned())).collect();
        assert_eq!(outcome.store, want_store, "{name}: store contents");
        assert_eq!(outcome.nbytes as i64, int(field(case, "nbytes")), "{name}: nbytes");

        let want_calls: Vec<HookCall> = items(field(case, "hook_calls"))
            .iter()
            .map(|c| {
                let part = if text_of(c, "part") == "key" { Part::Key } else { Part::Value };
                let cause = match text_of(c, "cause_type") {
                    "UnicodeDecodeError" => "UnicodeDecodeError",
                    "JSONDecodeError" => "JSONDecodeError",
                    "ValueError" => "ValueError",
                    other => panic!("{name}: cause {other}"),
                };
                (
                    part,
                    text_of(c, "topic").to_owned(),
                    int(field(c, "partition")) as i32,
                    int(field(c, "offset")),
                    cause,
                )
            })
            .collect();
        assert_eq!(calls, want_calls, "{name}: hook calls");

        match (opt(case, "error"), &outcome.error) {
            (None, None) => {}
            (Some(error), Some(PolicyError::Raised(e))) => {
                assert_eq!(text_of(error, "type"), "InvalidMessageError", "{name}");
                assert!(text_of(error, "message").contains(&format!("{}/{}/{}", e.topic(), e.partition(), e.offset())));
            }
            (want, got) => panic!("{name}: Python error {want:?}, ours {got:?}"),
        }
    }
}
