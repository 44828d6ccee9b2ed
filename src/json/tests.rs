use super::encode::python_float_repr;
use super::lex::plain_run_end;
use super::*;

fn canon(text: &str) -> String {
    String::from_utf8(to_canonical_bytes(&parse(text).unwrap()).unwrap()).unwrap()
}

fn repr(v: f64) -> String {
    let mut s = String::new();
    python_float_repr(v, &mut s);
    s
}

#[test]
fn float_repr_matches_python() {
    // Values and Python 3.12 `repr` outputs.
    let cases = [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (1.0, "1.0"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (1e15, "1000000000000000.0"),
        (1e16, "1e+16"),
        (1.5e16, "1.5e+16"),
        (123456789012345680.0, "1.2345678901234568e+17"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (2.5e-7, "2.5e-07"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (1e22, "1e+22"),
        (-1.5, "-1.5"),
        (9999999999999998.0, "9999999999999998.0"),
        (0.30000000000000004, "0.30000000000000004"),
    ];
    for (v, want) in cases {
        assert_eq!(repr(v), want, "repr({v:e})");
    }
}

#[test]
fn attr_43_sorted_keys_no_spaces_utf8() {
    assert_eq!(canon(r#"{"b":2,"a":1}"#), r#"{"a":1,"b":2}"#);
    assert_eq!(canon(r#"{ "z" : { "y":1, "x":[1, 2.50, "M\u00fcller"] } }"#), r#"{"z":{"x":[1,2.5,"Müller"],"y":1}}"#);
    assert_eq!(canon(r#""a\/b\u001F\u2028""#), "\"a/b\\u001f\u{2028}\"");
    assert_eq!(canon("-0"), "0");
    assert_eq!(canon("18446744073709551616"), "18446744073709551616");
    assert_eq!(canon("-9223372036854775809"), "-9223372036854775809");
    assert_eq!(canon(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
}

#[test]
fn strict_rejections() {
    assert!(matches!(parse("NaN"), Err(JsonError::NonFiniteLiteral { .. })));
    assert!(matches!(parse("[-Infinity]"), Err(JsonError::NonFiniteLiteral { .. })));
    assert!(matches!(parse("1e400"), Err(JsonError::NumberOutOfRange { .. })));
    assert!(parse(&"9".repeat(INT_DIGITS_MAX)).is_ok() && parse(&format!("-{}", "9".repeat(INT_DIGITS_MAX))).is_ok());
    assert!(matches!(parse(&"9".repeat(INT_DIGITS_MAX + 1)), Err(JsonError::IntegerTooLong { .. })));
    assert!(matches!(parse(r#""\ud800""#), Err(JsonError::InvalidEscape { .. })));
    assert!(matches!(parse(r#""\udc00\ud800""#), Err(JsonError::InvalidEscape { .. })));
    assert!(matches!(parse("\"a\u{1}\""), Err(JsonError::ControlCharacter { .. })));
    assert!(matches!(parse("{} x"), Err(JsonError::TrailingData { .. })));
    assert!(matches!(parse("01"), Err(JsonError::TrailingData { .. })));
    assert!(matches!(parse("1."), Err(JsonError::InvalidNumber { .. })));
    assert!(matches!(parse("\u{feff}{}"), Err(JsonError::UnexpectedChar { .. })));
    let deep = "[".repeat(JSON_DEPTH_MAX + 1) + &"]".repeat(JSON_DEPTH_MAX + 1);
    assert!(matches!(parse(&deep), Err(JsonError::TooDeep { .. })));
    let ok = "[".repeat(JSON_DEPTH_MAX) + &"]".repeat(JSON_DEPTH_MAX);
    assert!(parse(&ok).is_ok());
    assert_eq!(parse(r#""\ud83d\ude00""#).unwrap(), Value::Str("😀".into()));
}

#[test]
fn non_finite_floats_do_not_encode() {
    assert!(matches!(to_canonical_bytes(&Value::Float(f64::NAN)), Err(EncodeError::NonFiniteFloat { .. })));
    assert!(to_canonical_bytes(&Value::Float(f64::INFINITY)).is_err());
}

#[test]
fn canonical_scan_agrees_on_examples() {
    let yes = [
        r#"{}"#,
        r#"{"a":1,"b":[1.5,"x\n",null]}"#,
        "{\"\u{e9}\":\"\u{2028}\\u0001\"}",
        r#"{"\u0000":1,"\n":2,"\"":3,"a":{"\\":4}}"#,
    ];
    for text in yes {
        assert_eq!(check_canonical_object(text.as_bytes()), Ok(true), "{text}");
    }
    let no = [
        r#"{"b":1,"a":2}"#,
        r#"{"a":1,"a":1}"#,
        r#"{ }"#,
        r#"{"a":1.50}"#,
        r#"{"a":-0}"#,
        r#"{"a":"\u00e9"}"#,
        r#"{"a":1e16}"#,
        "[]",
        r#"{"\u0061":1}"#,
    ];
    for text in no {
        assert_eq!(check_canonical_object(text.as_bytes()), Ok(false), "{text}");
    }
    assert!(check_canonical_object(b"{\"a\":NaN}").is_err());
    assert!(check_canonical_object(b"{\"a\":1").is_err());
    assert!(check_canonical_object(b"\xff").is_err());
}

proptest::proptest! {
    /// The eight-at-a-time scan stops exactly where a byte-at-a-time scan does, at every
    /// start, over bytes dense in the ones that matter (and in their SWAR near-misses).
    #[test]
    fn plain_run_end_matches_the_byte_loop(
        bytes in proptest::collection::vec(proptest::prop_oneof![
            proptest::prelude::Just(b'"'), proptest::prelude::Just(b'\\'),
            proptest::prelude::Just(0x1f_u8), proptest::prelude::Just(0x20_u8),
            proptest::prelude::Just(0x21_u8), proptest::prelude::Just(0x5b_u8),
            proptest::prelude::Just(0x00_u8), proptest::prelude::Just(0x80_u8),
            proptest::prelude::Just(0xa2_u8), proptest::prelude::Just(0xdc_u8),
            proptest::prelude::any::<u8>(), 0x61_u8..0x7b,
        ], 0..40),
    ) {
        for from in 0..=bytes.len() {
            let naive = from + bytes[from..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(bytes.len() - from);
            proptest::prop_assert_eq!(plain_run_end(&bytes, from), naive, "from {}", from);
        }
    }
}

/// Inputs dense in what the canonical scan must get right: JSON syntax, strings with
/// multi-byte characters, and bytes that are not UTF-8 (stray continuation bytes, truncated
/// sequences, overlong forms, surrogates) inside and outside strings.
fn json_ish_bytes() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;
    let piece = prop_oneof![
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"\"".to_vec()),
        Just(b":".to_vec()),
        Just(b",".to_vec()),
        Just(b"[1,2.5]".to_vec()),
        Just(b"\"a\"".to_vec()),
        Just(b"\"b\":".to_vec()),
        Just(b"\\u00e9".to_vec()),
        Just(b"\\n".to_vec()),
        Just(b" ".to_vec()),
        Just("é".as_bytes().to_vec()),
        Just("€".as_bytes().to_vec()),
        Just("😀".as_bytes().to_vec()),
        Just(vec![0x80]),
        Just(vec![0xc3]),
        Just(vec![0xe2, 0x82]),
        Just(vec![0xc0, 0xaf]),
        Just(vec![0xed, 0xa0, 0x80]),
        Just(vec![0xf4, 0x90, 0x80, 0x80]),
        Just(vec![0xff]),
        any::<u8>().prop_map(|b| vec![b]),
        "[a-z]{0,12}".prop_map(String::into_bytes),
    ];
    let shaped = proptest::collection::vec(piece.clone(), 0..8).prop_map(|pieces| {
        // Mostly inside one string value of an object, where non-ASCII bytes are legal.
        let mut bytes = br#"{"k":""#.to_vec();
        bytes.extend(pieces.concat());
        bytes.extend_from_slice(br#""}"#);
        bytes
    });
    prop_oneof![shaped, proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())]
}

proptest::proptest! {
    /// The canonical scan validates UTF-8 as it scans (one pass, no separate check): the input is
    /// refused as not UTF-8 exactly when `std::str::from_utf8` refuses it; otherwise the scan
    /// accepts exactly what the parser accepts, and calls canonical exactly the objects that
    /// re-encode to themselves.
    #[test]
    fn the_canonical_scan_validates_utf8_as_the_parser_and_encoder_decide(bytes in json_ish_bytes()) {
        let scanned = check_canonical_object(&bytes);
        match std::str::from_utf8(&bytes) {
            Err(_) => proptest::prop_assert!(
                matches!(scanned, Err(CanonicalScanError::Utf8(_))), "{:?}: {:?}", bytes, scanned
            ),
            Ok(text) => {
                let parsed = parse(text);
                proptest::prop_assert_eq!(scanned.is_ok(), parsed.is_ok(), "{:?}: {:?}", text, scanned);
                if let Ok(value) = parsed {
                    let canonical = matches!(value, Value::Object(_))
                        && to_canonical_bytes(&value).is_ok_and(|encoded| encoded == bytes);
                    proptest::prop_assert_eq!(scanned, Ok(canonical), "{:?}", text);
                }
            }
        }
    }
}

proptest::proptest! {
    /// Integers encode as Python's `str(int)`: the digits, a `-` when negative, nothing else
    /// (the extremes included: `i64::MIN` has no positive counterpart).
    #[test]
    fn integers_encode_as_their_decimal_digits(v in proptest::prop_oneof![
        proptest::prelude::any::<i64>(),
        proptest::prelude::Just(i64::MIN),
        proptest::prelude::Just(i64::MAX),
        -1000i64..1000,
    ]) {
        proptest::prop_assert_eq!(super::to_canonical_bytes(&Value::Int(v)).unwrap(), v.to_string().into_bytes());
    }

    /// A string survives encode then parse, escapes or not (the parser's path without escapes
    /// and its path with them agree with the encoder).
    #[test]
    fn strings_survive_encode_and_parse(s in "(\\PC|[\"\\\\\u{0}-\u{1f}])*") {
        let encoded = super::to_canonical_bytes(&Value::Str(s.clone())).unwrap();
        let parsed = parse(std::str::from_utf8(&encoded).unwrap()).unwrap();
        proptest::prop_assert_eq!(parsed, Value::Str(s));
    }
}

proptest::proptest! {
    /// An object's fields, duplicates included, read as inserting them one by one in order
    /// would: the last of equal keys wins (Python's `json.loads`).
    #[test]
    fn objects_read_as_inserts_in_order(fields in proptest::collection::vec(("[a-d]{1,2}", -3i64..3), 0..12)) {
        let text = format!(
            "{{{}}}",
            fields.iter().map(|(k, v)| format!("\"{k}\": {v}")).collect::<Vec<_>>().join(", ")
        );
        let mut expected = Map::new();
        for (k, v) in &fields {
            expected.insert(k.clone(), Value::Int(*v));
        }
        proptest::prop_assert_eq!(parse(&text).unwrap(), Value::Object(expected));
    }
}

/// The escaping rule of Python's `json.dumps(ensure_ascii=False)`, one char at a time.
fn escaped_like_python(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

proptest::proptest! {
    /// Strings encode exactly as Python escapes them: only '"', '\\' and the control
    /// characters, whatever surrounds them (runs of eight bytes and the bytes after them).
    #[test]
    fn strings_encode_as_python_escapes_them(s in "(\\PC|[\"\\\\\u{0}-\u{1f}]|[a-z]{8,20})*") {
        let encoded = super::to_canonical_bytes(&Value::Str(s.clone())).unwrap();
        proptest::prop_assert_eq!(String::from_utf8(encoded).unwrap(), escaped_like_python(&s));
    }
}
