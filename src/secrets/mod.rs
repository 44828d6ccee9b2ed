//! Field-level secrets (feature `secrets`): keyrings and the `flenc:` / `flsig:` tokens of
//! Python's `flechtwerk[secrets]` and `flechtctl` 0.17, byte-compatible both ways.
//!
//! A secret field's wire value is a token string; the rest of the record stays readable JSON.
//!
//! - **Encrypted values**, `flenc:jwe:<compact JWE>`: [`Keyring::encrypt`] seals a value's bytes
//!   (for the attribute codec, its canonical JSON) for a *scope* (`""`: unscoped), under the
//!   scope's sealing key: `dir` + `A256GCM` under a 32-byte oct key, or `ECDH-ES+A256KW` +
//!   `A256GCM` to an X25519 recipient (whose public half is enough to seal).
//!   [`Keyring::decrypt`] opens it under the reader's scope, with the **scope ratchet**: a scoped
//!   reader accepts tokens of its scope and unscoped ones, an unscoped reader only unscoped ones;
//!   a key bound to scopes opens only tokens stamped with one of them.
//! - **Signed values**, `flsig:jws:<compact JWS>`: [`Keyring::sign`] / [`Keyring::verify`],
//!   Ed25519, always scoped, the scope checked exactly.
//! - **Keyrings**: [`Keyring::from_json`] reads flechtctl's JWK Set file,
//!   [`Keyring::from_protected`] its password-protected form, [`Keyring::builder`] takes key bytes;
//!   [`Keyring::to_json`] and [`Keyring::to_protected`] write the files flechtctl writes.
//! - **Without a key**: [`is_encrypted`], [`is_signed`], [`kid_of`], [`signer_of`],
//!   [`read_header`], [`is_protected_keyring`].
//!
//! The attribute codecs built on them are [`encrypted`](crate::attribute::encrypted) and
//! [`signed`](crate::attribute::signed); they find their keyring in the application's run (the
//! builder's `keyring(...)`), else the process's ([`install_keyring`]), or in a
//! [`with_keyring`] call.
//!
//! What the attribute codec does with the keyring, in one place:
//!
//! ```
//! use flechtwerk::secrets::{is_encrypted, kid_of, Keyring};
//!
//! let keyring = Keyring::from_json(r#"{
//!     "keys": [{"kty": "oct", "kid": "k-2026", "k": "USAnUCqV4nHUS88IGPl4kP0mwcOWqOqobGtIZqGGNGM"}],
//!     "primary": "k-2026"
//! }"#)?;
//! // encode: the inner codec's canonical JSON, sealed for the attribute's scope
//! let wire = keyring.encrypt(br#""hunter2""#, "api_key")?;
//! // decode: classify by scheme, then open under the attribute's scope
//! assert!(is_encrypted(&wire));
//! assert_eq!(keyring.decrypt(&wire, "api_key")?.as_bytes(), br#""hunter2""#);
//! assert_eq!(kid_of(&wire)?, "k-2026"); // for the secret_decrypted(scope, kid) event
//! // a token read under another scope is refused, never misread
//! assert!(keyring.decrypt(&wire, "db").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Hygiene: key bytes live in memory wiped on drop (`zeroize`), decrypted payloads too
//! ([`Plaintext`]); no error text, log line or `Debug` output holds a key, a password or a
//! plaintext. The library reads no file: the application hands the keyring's text in.
//!
//! The formats and every rule copied from Python are written up in `docs/secrets-format.md`;
//! the cryptography is RustCrypto's and dalek's (`aes-gcm`, `aes-kw`, `x25519-dalek`,
//! `ed25519-dalek`, `concat-kdf`, `pbkdf2`/`sha2`), the JOSE framing above it ours.

mod error;
mod jose;
mod keyring;
mod runtime;
mod text;
mod tokens;

pub use error::{DecryptReason, KeyringError, Refusal, SecretError, SignatureReason};
pub use keyring::{is_protected_keyring, Keyring, KeyringBuilder};
#[cfg(feature = "testing")]
pub(crate) use runtime::enter;
pub(crate) use runtime::{bind, carry, keyring as active_keyring, report, SecretContext, SecretEvents};
pub use runtime::{install_keyring, with_keyring};
pub use tokens::{is_encrypted, is_signed, kid_of, read_header, signer_of, Plaintext, ENCRYPTED_SCHEME, SIGNED_SCHEME};
