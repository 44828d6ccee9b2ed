//! Text helpers: Python's `repr` of the values error messages quote (so the messages read like
//! flechtctl's for ASCII names), the JSON writers of the keyring file and of the token headers,
//! and the base64 engines.

use std::fmt::Write as _;

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use base64::engine::DecodePaddingMode;
use base64::Engine as _;

use crate::json::Value;

/// Python's `repr(str)`: single quotes unless the text has a `'` and no `"`, backslash escapes
/// for the quote, `\`, `\n`, `\r`, `\t` and other control characters.
pub(crate) fn repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            // Python escapes every non-printable character; below U+0100 those are the C0 and
            // C1 controls, DEL, NBSP and the soft hyphen (above, this prints them as they are).
            c if (c as u32) < 0x20 || (0x7f..=0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `repr` of an optional string (`None` when absent).
pub(crate) fn repr_opt(s: Option<&str>) -> String {
    s.map_or_else(|| "None".to_owned(), repr)
}

/// Python's `repr` of a list of strings: `['a', 'b']`.
pub(crate) fn repr_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(repr).collect();
    format!("[{}]", items.join(", "))
}

/// Python's `repr` of a JSON value as `json.loads` returns it (`None`, `True`, `1`, `'a'`, ...).
pub(crate) fn repr_value(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "None".to_owned(),
        Some(Value::Bool(true)) => "True".to_owned(),
        Some(Value::Bool(false)) => "False".to_owned(),
        Some(Value::Int(i)) => i.to_string(),
        Some(Value::BigInt(b)) => b.to_string(),
        Some(Value::Float(f)) => {
            let mut out = Vec::new();
            match crate::json::write_float(*f, &mut out) {
                Ok(()) => String::from_utf8_lossy(&out).into_owned(),
                Err(_) => "nan".to_owned(),
            }
        }
        Some(Value::Str(s)) => repr(s),
        Some(Value::List(items)) => {
            let items: Vec<String> = items.iter().map(|v| repr_value(Some(v))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(Value::Object(map)) => {
            let items: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", repr(k), repr_value(Some(v)))).collect();
            format!("{{{}}}", items.join(", "))
        }
    }
}

/// Python's type name of a JSON value as `json.loads` returns it.
pub(crate) fn py_type(v: Option<&Value>) -> &'static str {
    match v {
        None | Some(Value::Null) => "NoneType",
        Some(Value::Object(_)) => "dict",
        Some(other) => other.type_name(),
    }
}

/// A JSON string literal as Python's `json.dumps` writes it by default (`ensure_ascii=True`):
/// `"` and `\` escaped, `\n` `\r` `\t` `\b` `\f` by name, every other character outside
/// printable ASCII as `\uXXXX` (UTF-16 surrogate pairs beyond the BMP).
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// Token segments: unpadded base64url with canonical trailing bits, as joserfc decodes them
/// (no `=`, no `+` or `/`).
pub(crate) const STRICT: GeneralPurpose = URL_SAFE_NO_PAD;

/// Key material (`k`, `x`, `d`) as flechtctl decodes it: both alphabets, padding optional,
/// unused trailing bits ignored, any other character refused.
const KEY_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Why a key member did not decode; the text never quotes the input (it is key material).
pub(crate) fn decode_key_material(raw: &str) -> Result<Vec<u8>, String> {
    let standard: zeroize::Zeroizing<String> = zeroize::Zeroizing::new(
        raw.trim_end_matches('=')
            .chars()
            .map(|c| match c {
                '-' => '+',
                '_' => '/',
                c => c,
            })
            .collect(),
    );
    if !standard.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/') {
        return Err("Only base64 data is allowed".to_owned());
    }
    if standard.len() % 4 == 1 {
        return Err(format!(
            "Invalid base64-encoded string: number of data characters ({}) cannot be 1 more than a multiple of 4",
            standard.len()
        ));
    }
    KEY_LENIENT.decode(standard.as_bytes()).map_err(|_| "Incorrect padding".to_owned())
}

/// A header segment read without a key, as flechtctl peeks at the `kid` (Python's lenient
/// `urlsafe_b64decode`: characters outside the alphabets are dropped, padding is ignored).
pub(crate) fn decode_lenient(segment: &str) -> Result<Vec<u8>, String> {
    let kept: String = segment
        .chars()
        .filter_map(|c| match c {
            '-' => Some('+'),
            '_' => Some('/'),
            c if c.is_ascii_alphanumeric() || c == '+' || c == '/' => Some(c),
            _ => None,
        })
        .collect();
    if kept.len() % 4 == 1 {
        return Err(format!(
            "Invalid base64-encoded string: number of data characters ({}) cannot be 1 more than a multiple of 4",
            kept.len()
        ));
    }
    KEY_LENIENT.decode(kept.as_bytes()).map_err(|_| "Incorrect padding".to_owned())
}

/// Unpadded base64url, as every segment and key member is written.
pub(crate) fn b64url(bytes: &[u8]) -> String {
    STRICT.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_is_pythons() {
        assert_eq!(repr("a"), "'a'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("a'\""), "'a\\'\"'");
        assert_eq!(repr("x\ny\\"), "'x\\ny\\\\'");
        assert_eq!(repr_list(["api", "db"]), "['api', 'db']");
        assert_eq!(repr_value(Some(&Value::Int(1))), "1");
        assert_eq!(repr_value(None), "None");
    }

    #[test]
    fn json_strings_escape_like_python() {
        let mut out = String::new();
        push_json_str(&mut out, "schlüssel \"1\" 🔑\u{7f}");
        assert_eq!(out, "\"schl\\u00fcssel \\\"1\\\" \\ud83d\\udd11\\u007f\"");
    }

    #[test]
    fn key_material_decodes_leniently() {
        assert_eq!(decode_key_material("AQI").unwrap(), [1, 2]);
        assert_eq!(decode_key_material("AQI=").unwrap(), [1, 2]);
        assert_eq!(decode_key_material("AQJ").unwrap(), [1, 2]); // trailing bits ignored
        assert_eq!(decode_key_material("+/8").unwrap(), decode_key_material("-_8").unwrap());
        assert!(decode_key_material("AQ I").is_err());
        assert!(decode_key_material("AQIDA").is_err());
    }
}
