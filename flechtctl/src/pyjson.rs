//! JSON text as Python's `json.dumps` prints it: the value `decrypt` and `verify` print
//! (`ensure_ascii=False`, separators `", "` and `": "`), and the indented, sorted, ASCII-only
//! document `inspect` prints (`indent=2, sort_keys=True`).

use flechtwerk::json::{self, Value};

/// `json.dumps(value, ensure_ascii=False)`: one line, `", "` between items, `": "` after keys.
/// Objects come out in key order (the payloads flechtctl and flechtwerk write are canonical
/// JSON, whose keys are sorted already).
pub(crate) fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_inline(value, &mut out);
    out
}

fn write_inline(value: &Value, out: &mut String) {
    match value {
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_inline(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(key, false, out);
                out.push_str(": ");
                write_inline(item, out);
            }
            out.push('}');
        }
        scalar => write_scalar(scalar, false, out),
    }
}

/// `json.dumps(value, indent=2, sort_keys=True)`: non-ASCII escaped as `\uXXXX`.
pub(crate) fn dumps_indented(value: &Value) -> String {
    let mut out = String::new();
    write_indented(value, 0, &mut out);
    out
}

fn write_indented(value: &Value, level: usize, out: &mut String) {
    let newline = |out: &mut String, level: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(level));
    };
    match value {
        Value::List(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, level + 1);
                write_indented(item, level + 1, out);
            }
            newline(out, level);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, level + 1);
                write_str(key, true, out);
                out.push_str(": ");
                write_indented(item, level + 1, out);
            }
            newline(out, level);
            out.push('}');
        }
        Value::List(_) => out.push_str("[]"),
        Value::Object(_) => out.push_str("{}"),
        scalar => write_scalar(scalar, true, out),
    }
}

fn write_scalar(value: &Value, ascii: bool, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(v) => out.push_str(&v.to_string()),
        Value::BigInt(v) => out.push_str(v.as_str()),
        Value::Float(v) => {
            // The parser admits finite floats only; Python's repr of them.
            let mut bytes = Vec::new();
            if json::write_float(*v, &mut bytes).is_ok() {
                out.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        Value::Str(s) => write_str(s, ascii, out),
        Value::List(_) | Value::Object(_) => unreachable!("containers are written by the callers"),
    }
}

/// A JSON string as Python writes it: `"` and `\` escaped, the short escapes `\n \r \t \b \f`,
/// other control characters as `\u00xx`; with `ascii`, every character outside `' '..='~'` as
/// `\uxxxx` (a surrogate pair above U+FFFF).
fn write_str(s: &str, ascii: bool, out: &mut String) {
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
            c if (c as u32) < 0x20 || (ascii && !(' '..='~').contains(&c)) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_as_python() {
        let value = json::parse(r#"{"b": [1, 2.5, 1e16, null, true], "a": {"x": "ü\n\u0001"}, "c": {}}"#).unwrap();
        assert_eq!(dumps(&value), "{\"a\": {\"x\": \"ü\\n\\u0001\"}, \"b\": [1, 2.5, 1e+16, null, true], \"c\": {}}");
    }

    #[test]
    fn indented_as_python() {
        let value = json::parse(r#"{"h": {"kid": "zähler😀", "n": [], "m": [1]}, "a": false}"#).unwrap();
        assert_eq!(
            dumps_indented(&value),
            "{\n  \"a\": false,\n  \"h\": {\n    \"kid\": \"z\\u00e4hler\\ud83d\\ude00\",\n    \"m\": [\n      1\n    ],\n    \"n\": []\n  }\n}"
        );
    }
}
