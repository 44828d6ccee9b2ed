//! The strict decode rules (INV-01, INV-02).

use crate::json::{self, JsonError, Map, Value};

/// Why a key or value does not decode.
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
pub fn decode_key(key: Option<&[u8]>) -> Result<String, DecodeError> {
    match key {
        None => Ok(String::new()),
        Some(bytes) => Ok(std::str::from_utf8(bytes)?.to_owned()),
    }
}

/// Decodes a value: strict UTF-8, then JSON, then an object. An empty or absent value is the
/// empty object, never an error (INV-02).
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
