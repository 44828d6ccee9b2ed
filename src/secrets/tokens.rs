//! `flenc:jwe:` and `flsig:jws:` tokens over an explicit keyring: seal, open, sign, verify,
//! re-seal, and the key-less lookups.

use std::fmt;
use std::ops::Deref;

use zeroize::Zeroizing;

use super::error::{DecryptReason, KeyringError, Refusal, SecretError, SignatureReason};
use super::jose::{self, Profile, DIR, ECDH_ES_A256KW, SCOPE_MEMBER};
use super::keyring::{Entry, Keyring, Material};
use crate::json::{Map, Value};

/// The scheme of an encrypted value: any string starting `flenc:` is ciphertext-form.
pub const ENCRYPTED_SCHEME: &str = "flenc:";
/// The scheme of a signed value: any string starting `flsig:` is signed-form.
pub const SIGNED_SCHEME: &str = "flsig:";

/// A decrypted payload: the bytes that were sealed (for the codec, a value's canonical JSON).
/// Wiped from memory when dropped; `Debug` shows only its length.
///
/// ```
/// use flechtwerk::secrets::Keyring;
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let plaintext = keyring.decrypt(&keyring.encrypt(b"\"s3cret\"", "")?, "")?;
/// assert_eq!(&*plaintext, b"\"s3cret\"");
/// assert_eq!(format!("{plaintext:?}"), "Plaintext(8 bytes)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Plaintext(Zeroizing<Vec<u8>>);

impl Plaintext {
    /// The bytes.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// # let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// let plaintext = keyring.decrypt(&keyring.encrypt(b"17", "")?, "")?;
    /// assert_eq!(plaintext.as_bytes(), b"17");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Deref for Plaintext {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for Plaintext {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Plaintext({} bytes)", self.0.len())
    }
}

impl Keyring {
    /// Seals `payload` for `scope` (`""`: unscoped) under the scope's sealing key
    /// ([`sealing_kid`](Self::sealing_kid)): `dir` + `A256GCM` under an oct key,
    /// `ECDH-ES+A256KW` + `A256GCM` to an X25519 recipient. The header is Python's, member for
    /// member (`alg`, `enc`, `kid`, then `flenc_scope` when scoped, then `epk`); a fresh IV (and
    /// ephemeral key) each time, so two tokens of one value differ. A payload or scope too large
    /// for a reader is refused here ([`SecretError::TooLarge`]: over 49,152 bytes, or a header
    /// over 1,024 characters).
    ///
    /// ```
    /// use flechtwerk::secrets::{kid_of, Keyring};
    ///
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// let token = keyring.encrypt(br#"{"user":"svc"}"#, "db")?;
    /// assert_eq!(kid_of(&token)?, "k1");
    /// assert_ne!(token, keyring.encrypt(br#"{"user":"svc"}"#, "db")?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encrypt(&self, payload: &[u8], scope: &str) -> Result<String, SecretError> {
        let kid = self.sealing_kid(scope)?;
        let entry = &self.entries[kid];
        let compact = match &entry.material {
            Material::Oct(key) => {
                let mut header = jose::jwe_header_head(DIR, kid, scope);
                header.push('}');
                jose::check_jwe_sizes(&header, payload.len())?;
                jose::seal(&header, key, &[], payload)?
            }
            Material::X25519 { public, .. } => {
                check_halves(kid, entry, "X25519")?;
                jose::seal_ecdh(jose::jwe_header_head(ECDH_ES_A256KW, kid, scope), kid, public, payload)?
            }
            Material::Ed25519 { .. } => return Err(KeyringError::UnknownKey { kid: kid.to_owned() }.into()),
        };
        Ok(format!("flenc:jwe:{compact}"))
    }

    /// Opens a `flenc:` token read under `scope` (`""`: unscoped), flechtctl's checks in its
    /// order: the envelope; the `kid` (read without a key); the kind of the key behind the kid
    /// picks the only algorithms accepted (`dir` for an oct key, `ECDH-ES+A256KW` for an X25519
    /// recipient, always `A256GCM`; the token never chooses); the JOSE checks and the tag; the
    /// scope ratchet (a scoped reader accepts its scope and unscoped tokens, an unscoped reader
    /// only unscoped ones); the key's binding (the stamped scope must be one of a bound key's).
    ///
    /// ```
    /// use flechtwerk::secrets::{Keyring, SecretError};
    ///
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// let unscoped = keyring.encrypt(b"1", "")?;
    /// assert_eq!(keyring.decrypt(&unscoped, "api")?.as_bytes(), b"1"); // the upgrade path
    /// let scoped = keyring.encrypt(b"1", "api")?;
    /// assert!(matches!(keyring.decrypt(&scoped, ""), Err(SecretError::Decrypt { .. }))); // downgrade
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decrypt(&self, token: &str, scope: &str) -> Result<Plaintext, SecretError> {
        let compact = jose::strip_envelope(token, "flenc", "jwe")?;
        let kid = jose::peek_kid(compact)?;
        let refused = |reason: Option<DecryptReason>, cause: Option<Refusal>| SecretError::Decrypt {
            scope: scope.to_owned(),
            kid: kid.clone(),
            reason: reason.map(Box::new),
            cause,
        };
        let failed = |cause| refused(None, Some(cause));
        let entry = self.entries.get(&kid);
        let (plaintext, header) = match entry {
            Some(e @ Entry { material: Material::X25519 { private, .. }, .. }) => {
                let Some(private) = private else {
                    return Err(refused(Some(DecryptReason::PublicHalfOnly { kid: kid.clone() }), None));
                };
                check_halves(&kid, e, "X25519")?;
                let jwe = jose::parse_jwe(compact, Profile::EcdhEs).map_err(failed)?;
                (jwe.open_ecdh(private).map_err(failed)?, jwe.header)
            }
            Some(Entry { material: Material::Oct(key), .. }) => {
                let jwe = jose::parse_jwe(compact, Profile::Dir).map_err(failed)?;
                (jwe.open_dir(key).map_err(failed)?, jwe.header)
            }
            _ => return Err(failed(Refusal::UnknownKey { kid: kid.clone() })),
        };
        let stamped = stamped_scope(&header);
        if let Some(stamped) = stamped {
            if scope.is_empty() {
                return Err(refused(Some(DecryptReason::Downgrade { stamped: stamped.to_owned() }), None));
            }
            if stamped != scope {
                let reason = DecryptReason::ScopeMismatch { stamped: stamped.to_owned(), read: scope.to_owned() };
                return Err(refused(Some(reason), None));
            }
        }
        if let Some(bound) = entry.and_then(|e| e.bound.as_ref()) {
            if !stamped.is_some_and(|s| bound.contains(s)) {
                let reason = DecryptReason::KeyBound {
                    kid: kid.clone(),
                    bound: bound.iter().cloned().collect(),
                    stamped: stamped.map(str::to_owned),
                };
                return Err(refused(Some(reason), None));
            }
        }
        Ok(Plaintext(plaintext))
    }

    /// Re-seals a token under the current sealing key for `scope`: opens it under `scope`'s
    /// rules, then seals the exact plaintext bytes again, stamped `scope`. Moves a token to a new
    /// primary, between `dir` and a recipient, and promotes an unscoped token to `scope`; it
    /// cannot strip a scope (the unscoped read refuses).
    ///
    /// ```
    /// use flechtwerk::secrets::{kid_of, Keyring};
    ///
    /// let old = Keyring::builder().oct("k1", &[1; 32]).primary("k1").build()?;
    /// let token = old.encrypt(b"\"v\"", "")?;
    /// let rotated = old.to_builder().oct("k2", &[2; 32]).primary("k2").build()?;
    /// let moved = rotated.reencrypt(&token, "")?;
    /// assert_eq!(kid_of(&moved)?, "k2");
    /// assert_eq!(rotated.decrypt(&moved, "")?.as_bytes(), b"\"v\"");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reencrypt(&self, token: &str, scope: &str) -> Result<String, SecretError> {
        let plaintext = self.decrypt(token, scope)?;
        self.encrypt(&plaintext, scope)
    }

    /// Signs `payload` for `scope` (required) with the scope's signing key: an Ed25519 compact
    /// JWS, `flsig:jws:`, header `{"alg":"Ed25519","flenc_scope":…,"kid":…}`. Deterministic:
    /// one payload, scope and key give one token, byte for byte Python's.
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder()
    ///     .oct("k1", &[7; 32])
    ///     .primary("k1")
    ///     .ed25519("sig", &[0; 32], Some(&[1; 32])) // (a mismatched public half: refused on use)
    ///     .bind("sig", ["api"])
    ///     .signing_for("api", "sig")
    ///     .build()?;
    /// assert!(keyring.sign(b"1", "api").is_err());
    /// let keyring = keyring.to_builder().remove("sig").generate_ed25519("sig").bind("sig", ["api"]).signing_for("api", "sig").build()?;
    /// let token = keyring.sign(b"{\"order\":17}", "api")?;
    /// assert_eq!(token, keyring.sign(b"{\"order\":17}", "api")?);
    /// assert_eq!(keyring.verify(&token, "api")?, b"{\"order\":17}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sign(&self, payload: &[u8], scope: &str) -> Result<String, SecretError> {
        if scope.is_empty() {
            return Err(SecretError::ScopeRequired { verb: "sign" });
        }
        let kid = self.signing_kid(scope)?;
        let entry = &self.entries[kid];
        let Material::Ed25519 { private: Some(seed), .. } = &entry.material else {
            return Err(KeyringError::UnknownKey { kid: kid.to_owned() }.into());
        };
        check_halves(kid, entry, "Ed25519")?;
        Ok(format!("flsig:jws:{}", jose::sign(seed, kid, scope, payload)?))
    }

    /// Verifies a `flsig:` token read under `scope` (required) and returns its payload: the
    /// envelope, the signer's kid (an Ed25519 key of this keyring), `Ed25519` only, the
    /// signature, then the stamped scope must equal `scope` (no ratchet: every signature is
    /// scoped) and `scope` must be in the signer's binding.
    ///
    /// ```
    /// use flechtwerk::secrets::{Keyring, SecretError};
    ///
    /// let keyring = Keyring::builder()
    ///     .oct("k1", &[7; 32])
    ///     .primary("k1")
    ///     .generate_ed25519("sig")
    ///     .bind("sig", ["api"])
    ///     .signing_for("api", "sig")
    ///     .build()?;
    /// let token = keyring.sign(b"1", "api")?;
    /// assert!(matches!(keyring.verify(&token, ""), Err(SecretError::ScopeRequired { .. })));
    /// assert_eq!(keyring.verify(&token, "api")?, b"1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn verify(&self, token: &str, scope: &str) -> Result<Vec<u8>, SecretError> {
        if scope.is_empty() {
            return Err(SecretError::ScopeRequired { verb: "verify" });
        }
        let compact = jose::strip_envelope(token, "flsig", "jws")?;
        let kid = jose::peek_kid(compact)?;
        let refused = |reason: Option<SignatureReason>, cause: Option<Refusal>| SecretError::Signature {
            scope: scope.to_owned(),
            kid: kid.clone(),
            reason: reason.map(Box::new),
            cause,
        };
        let entry = self.entries.get(&kid);
        let Some(Material::Ed25519 { public, .. }) = entry.map(|e| &e.material) else {
            return Err(refused(None, Some(Refusal::UnknownKey { kid: kid.clone() })));
        };
        let jws = jose::parse_jws(compact).map_err(|cause| refused(None, Some(cause)))?;
        jws.verify(public).map_err(|cause| refused(None, Some(cause)))?;
        let stamped = stamped_scope(&jws.header);
        if stamped != Some(scope) {
            let reason = SignatureReason::ScopeMismatch { stamped: stamped.map(str::to_owned), read: scope.to_owned() };
            return Err(refused(Some(reason), None));
        }
        if let Some(bound) = entry.and_then(|e| e.bound.as_ref()) {
            if !bound.contains(scope) {
                let reason = SignatureReason::SignerBound { kid: kid.clone(), bound: bound.iter().cloned().collect() };
                return Err(refused(Some(reason), None));
            }
        }
        Ok(jws.payload)
    }
}

fn stamped_scope(header: &Map) -> Option<&str> {
    match header.get(SCOPE_MEMBER) {
        Some(Value::Str(s)) => Some(s),
        _ => None,
    }
}

fn check_halves(kid: &str, entry: &Entry, kind: &'static str) -> Result<(), KeyringError> {
    if !entry.halves_match {
        return Err(KeyringError::MismatchedHalves { kind, kid: kid.to_owned() });
    }
    Ok(())
}

/// Whether `value` is ciphertext-form: a string under the `flenc:` scheme (the envelope is
/// checked when it is read, so a future `flenc:` form is never taken for plaintext).
///
/// ```
/// use flechtwerk::secrets::is_encrypted;
///
/// assert!(is_encrypted("flenc:jwe:…"));
/// assert!(is_encrypted("flenc:v2:…"));
/// assert!(!is_encrypted("https://example.com"));
/// ```
pub fn is_encrypted(value: &str) -> bool {
    value.starts_with(ENCRYPTED_SCHEME)
}

/// Whether `value` is signed-form: a string under the `flsig:` scheme.
///
/// ```
/// use flechtwerk::secrets::is_signed;
///
/// assert!(is_signed("flsig:jws:…"));
/// assert!(!is_signed("flenc:jwe:…"));
/// ```
pub fn is_signed(value: &str) -> bool {
    value.starts_with(SIGNED_SCHEME)
}

/// The kid a `flenc:` token was sealed under, read without a key (which keys do stored records
/// still depend on).
///
/// ```
/// use flechtwerk::secrets::{kid_of, Keyring, SecretError};
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// assert_eq!(kid_of(&keyring.encrypt(b"1", "")?)?, "k1");
/// assert!(matches!(kid_of("plain"), Err(SecretError::NotAToken { .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn kid_of(token: &str) -> Result<String, SecretError> {
    if !is_encrypted(token) {
        return Err(SecretError::NotAToken { expected: "flenc" });
    }
    jose::peek_kid(jose::strip_envelope(token, "flenc", "jwe")?)
}

/// The signer's kid of a `flsig:` token, read without a key.
///
/// ```
/// use flechtwerk::secrets::{signer_of, SecretError};
///
/// assert!(matches!(signer_of("flenc:jwe:x"), Err(SecretError::NotAToken { .. })));
/// ```
pub fn signer_of(token: &str) -> Result<String, SecretError> {
    if !is_signed(token) {
        return Err(SecretError::NotAToken { expected: "flsig" });
    }
    jose::peek_kid(jose::strip_envelope(token, "flsig", "jws")?)
}

/// The protected header of a `flenc:` or `flsig:` token, **unauthenticated** (no key is
/// involved): for inspection and tooling (`flechtctl inspect`).
///
/// ```
/// use flechtwerk::json::Value;
/// use flechtwerk::secrets::{read_header, Keyring};
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let header = read_header(&keyring.encrypt(b"1", "db")?)?;
/// assert_eq!(header["alg"], Value::from("dir"));
/// assert_eq!(header["flenc_scope"], Value::from("db"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_header(token: &str) -> Result<Map, SecretError> {
    if is_encrypted(token) {
        jose::peek_header(jose::strip_envelope(token, "flenc", "jwe")?)
    } else if is_signed(token) {
        jose::peek_header(jose::strip_envelope(token, "flsig", "jws")?)
    } else {
        Err(SecretError::NotAToken { expected: "flenc or flsig" })
    }
}
