//! Golden vectors from the Python reference implementation: `tests/golden/vectors.json`, written by
//! `tests/golden/generate.py` from flechtwerk 0.17.0 on CPython 3.13.0.
//!
//! Every category that applies to the Rust API is checked case by case: byte-identical where we
//! promise compatibility, and where we deliberately differ, our side is asserted explicitly (so a
//! divergence can neither grow nor vanish unnoticed). `docs/compatibility.md` explains each one.
//! Test names carry the behaviour IDs of `behaviours.md` they pin; failures name the case input.
//!
//! One file per subject (the data files beside them are the vectors and their generators):
//! - `vectors.rs`: loading and reading the vectors, and the helpers every subject shares;
//! - `canonical_json.rs`: canonical JSON and Python's float `repr`;
//! - `decode.rs`: value and key decoding, tombstones;
//! - `token_for.rs`: Kafka's default partitioner as the ownership hash;
//! - `datetime.rs`: the DATETIME, DATE and TIME codecs;
//! - `codecs.rs`: SET and ANY encodings, and the codec errors;
//! - `messages.rs`: message payloads, the invalid-message hook, timestamps and state bytes;
//! - `config_store.rs`: the config store's bootstrap and drain scenarios.

mod canonical_json;
mod codecs;
mod config_store;
mod datetime;
mod decode;
mod messages;
mod token_for;
mod vectors;
