//! The strict decode rules (INV-01, INV-02).

use crate::json::{self, JsonError, Map, Value};

/// Why a key or value does not decode.
///
/// ```
/// use flechtwerk::wire::{decode_value, DecodeError};
///
/// assert!(matches!(decode_value(Some(b"[1]")), Err(DecodeError::NotAnObject { found: "list" })));
/// assert!(matches!(decode_value(Some(b"{broken")), Err(DecodeError::Json(_))));
/// assert!(matches!(decode_value(Some(b"\xff")), Err(DecodeError::Utf8(_))));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Not UTF-8 (strict: surrogates, overlong forms and stray bytes are all rejected).
    #[error("not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    /// UTF-8, but not JSON.
    #[error("not JSON: {0}")]
    Json(#[from] JsonError),
    /// JSON, but not an object (ERR-28).
    #[error("expected an object, got {found}")]
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
}

/// Decodes a key: strict UTF-8; an absent key is `""` (INV-01).
///
/// ```
/// use flechtwerk::wire::decode_key;
///
/// assert_eq!(decode_key(Some(b"ada"))?, "ada");
/// assert_eq!(decode_key(None)?, "");
/// assert!(decode_key(Some(b"\xc3")).is_err());
/// # Ok::<(), flechtwerk::wire::DecodeError>(())
/// ```
pub fn decode_key(key: Option<&[u8]>) -> Result<String, DecodeError> {
    decode_key_str(key).map(str::to_owned)
}

/// [`decode_key`] without the copy: the key as the `&str` it already is.
pub(crate) fn decode_key_str(key: Option<&[u8]>) -> Result<&str, DecodeError> {
    Ok(std::str::from_utf8(key.unwrap_or_default())?)
}

/// Decodes a value: strict UTF-8, then JSON, then an object. An empty or absent value is the
/// empty object, never an error (INV-02).
///
/// ```
/// use flechtwerk::json::Value;
/// use flechtwerk::wire::decode_value;
///
/// assert_eq!(decode_value(Some(br#"{"n":1}"#))?["n"], Value::Int(1));
/// assert!(decode_value(None)?.is_empty()); // a tombstone reads as the empty object
/// assert!(decode_value(Some(b""))?.is_empty());
/// # Ok::<(), flechtwerk::wire::DecodeError>(())
/// ```
pub fn decode_value(value: Option<&[u8]>) -> Result<Map, DecodeError> {
    let bytes = match value {
        None | Some(b"") => return Ok(Map::new()),
        Some(bytes) => bytes,
    };
    match json::parse(std::str::from_utf8(bytes)?)? {
        Value::Object(map) => Ok(map),
        other => Err(DecodeError::NotAnObject { found: other.type_name() }),
    }
}
