//! `canonical_json` and `float_repr`: canonical JSON bytes and floats written as Python's
//! `repr` (ATTR-43).

use std::collections::BTreeSet;

use flechtwerk::json::{self, Value};
use flechtwerk::wire::{self, DecodeError};
use flechtwerk::ConfigStore;

use crate::vectors::{canonical, cases, field, hex, json_variant, opt, python_cause, show, text, text_of, to_hex};

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
