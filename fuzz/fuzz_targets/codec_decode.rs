//! Codec decoding (ATTR-10..16): any JSON value through every codec never panics; what decodes
//! re-encodes to a value that decodes to the same thing (and, for exact codecs, the same JSON).
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use flechtwerk::attribute::{dict, list, set, tuple, Codec, ANY, BOOL, DATE, DATETIME, FLOAT, INT, RECORD, STR, TIME};
use flechtwerk::json::{self, Value};
use libfuzzer_sys::fuzz_target;

/// Decode, and when that works: encode, and check the round trip.
fn exact<V: PartialEq + std::fmt::Debug>(codec: &dyn Codec<V>, raw: &Value) {
    if let Ok(v) = codec.decode(raw) {
        let encoded = codec.encode(&v).expect("a decoded value encodes");
        assert_eq!(&encoded, raw, "exact codecs reproduce their input");
    }
}

/// Like `exact`, for codecs that normalise (sets dedup and sort; temporal values reformat).
fn stable<V: PartialEq + std::fmt::Debug>(codec: &dyn Codec<V>, raw: &Value) {
    if let Ok(v) = codec.decode(raw) {
        let Ok(encoded) = codec.encode(&v) else { return };
        let again = codec.decode(&encoded).expect("an encoded value decodes");
        assert_eq!(again, v);
        assert_eq!(codec.encode(&again).expect("encodes"), encoded, "encoding is a fixed point");
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Bare strings exercise the temporal parsers directly.
    let as_string = Value::Str(text.to_owned());
    stable(&DATETIME, &as_string);
    stable(&DATE, &as_string);
    stable(&TIME, &as_string);
    let Ok(raw) = json::parse(text) else { return };
    exact(&STR, &raw);
    exact(&INT, &raw);
    exact(&BOOL, &raw);
    exact(&FLOAT, &raw);
    exact(&ANY, &raw);
    exact(&RECORD, &raw);
    exact::<Vec<i64>>(&list(INT), &raw);
    exact::<BTreeMap<String, Vec<String>>>(&dict(list(STR)), &raw);
    exact::<Box<[bool]>>(&tuple(BOOL), &raw);
    stable::<BTreeSet<String>>(&set(STR), &raw);
    stable::<BTreeSet<i64>>(&set(INT), &raw);
    stable(&DATETIME, &raw);
    stable::<Vec<flechtwerk::attribute::Date>>(&list(DATE), &raw);
});
