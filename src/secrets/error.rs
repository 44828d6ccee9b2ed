//! The two error families, as Python's: [`KeyringError`] (the keyring: construction, lookups,
//! password-protected files) and [`SecretError`] (a token: format, decryption, signature).
//!
//! No text here ever holds key material, a password or a plaintext: kids, scopes, header member
//! names and lengths only. Messages read like flechtctl's (names quoted as Python's `repr` does)
//! so an operator sees the same words from either implementation.

use super::text::{repr, repr_list, repr_opt};

/// A keyring could not be built, opened, or asked for a key (Python's `KeyringError`, and
/// `UnknownKeyError` as [`KeyringError::UnknownKey`]).
///
/// ```
/// use flechtwerk::secrets::{Keyring, KeyringError};
///
/// let err = Keyring::from_json(r#"{"keys": [], "primary": "a"}"#).unwrap_err();
/// assert!(matches!(err, KeyringError::NoKeys));
/// assert_eq!(err.to_string(), "a keyring needs at least one key");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyringError {
    /// The document is a password-protected keyring: open it with
    /// [`Keyring::from_protected`](super::Keyring::from_protected).
    #[error("keyring document is password-protected — open it with its password (flechtctl keyring unprotect writes a plain copy)")]
    PasswordProtected,
    /// The document is not JSON (the detail names a byte offset, never the text).
    #[error("keyring document is not valid JSON: {detail}")]
    NotJson {
        /// Where the parser stopped.
        detail: String,
    },
    /// The document is JSON but not an object.
    #[error("keyring document must be a JSON object, got {got}")]
    NotObject {
        /// Python's name of the type found.
        got: &'static str,
    },
    /// `keys` is not an array.
    #[error("keyring 'keys' must be a JSON array")]
    KeysNotArray,
    /// A member of `keys` is not an object.
    #[error("each JWK must be a JSON object, got {got}")]
    JwkNotObject {
        /// Python's name of the type found.
        got: &'static str,
    },
    /// A JWK's `kty` is neither `oct` nor `OKP`.
    #[error("unsupported key type {kty} — only oct (symmetric) and OKP (X25519, Ed25519) keys are used")]
    UnsupportedKeyType {
        /// The `kty` found, as Python's `repr`.
        kty: String,
    },
    /// A JWK has no non-empty string `kid`.
    #[error("every JWK needs a non-empty string kid, got {got}")]
    BadKid {
        /// The `kid` found, as Python's `repr`.
        got: String,
    },
    /// Two JWKs share a kid.
    #[error("duplicate kid {} in the keyring", repr(.kid))]
    DuplicateKid {
        /// The kid.
        kid: String,
    },
    /// A JWK's `flenc_scopes` is not a non-empty array of non-empty strings.
    #[error("JWK {} 'flenc_scopes' must be a non-empty array of non-empty strings", repr(.kid))]
    BadScopes {
        /// The kid.
        kid: String,
    },
    /// A JWK lacks its key material member.
    #[error("JWK {} has no '{member}' (key material)", repr(.kid))]
    MissingMaterial {
        /// The kid.
        kid: String,
        /// `k`, `x` or `d`.
        member: &'static str,
    },
    /// A key material member is not base64url (the detail never quotes the material).
    #[error("JWK {} has malformed base64url '{member}': {detail}", repr(.kid))]
    MalformedMaterial {
        /// The kid.
        kid: String,
        /// `k`, `x` or `d`.
        member: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// An OKP JWK's `crv` is neither `X25519` nor `Ed25519`.
    #[error("JWK {} has unsupported curve {crv} — only X25519 and Ed25519 are used", repr(.kid))]
    UnsupportedCurve {
        /// The kid.
        kid: String,
        /// The `crv` found, as Python's `repr`.
        crv: String,
    },
    /// The document has no top-level `primary`.
    #[error("keyring document has no top-level 'primary' member")]
    NoPrimary,
    /// `flenc_primaries` or `flenc_signing` is not an object of strings.
    #[error("keyring '{member}' must be a JSON object of scope to kid strings")]
    BadScopeMap {
        /// The member's name.
        member: &'static str,
    },
    /// Neither an oct key nor an X25519 recipient (signers alone cannot seal anything).
    #[error("a keyring needs at least one key")]
    NoKeys,
    /// A kid is empty.
    #[error("a key id must be a non-empty string")]
    EmptyKid,
    /// One kid is given to two keys.
    #[error("kid {} is held as more than one kind of key", repr(.kid))]
    KidHeldTwice {
        /// The kid.
        kid: String,
    },
    /// An oct key is not 32 bytes.
    #[error("key {} is {len} bytes, expected 32 (AES-256)", repr(.kid))]
    OctKeyLength {
        /// The kid.
        kid: String,
        /// Its length in bytes.
        len: usize,
    },
    /// Half of an X25519 or Ed25519 key is not 32 bytes.
    #[error("{kind} key {} has a {len}-byte {half} half, expected 32", repr(.kid))]
    HalfLength {
        /// `X25519` or `Ed25519`.
        kind: &'static str,
        /// The kid.
        kid: String,
        /// `public` or `private`.
        half: &'static str,
        /// Its length in bytes.
        len: usize,
    },
    /// `primary` names no oct key and no X25519 recipient.
    #[error("primary {primary} is not among the keys {}", repr_list(.keys.iter().map(String::as_str)))]
    PrimaryNotAKey {
        /// The primary as Python's `repr` (it may not even be a string in a document).
        primary: String,
        /// The oct kids then the recipient kids, each sorted.
        keys: Vec<String>,
    },
    /// A binding names a kid the keyring does not hold.
    #[error("scopes name kid {}, which the keyring does not hold", repr(.kid))]
    BindingUnknownKid {
        /// The kid.
        kid: String,
    },
    /// A binding is empty or names an empty scope.
    #[error("key {} must be bound to a non-empty set of non-empty scope names", repr(.kid))]
    BadBinding {
        /// The kid.
        kid: String,
    },
    /// An X25519 or Ed25519 key is not bound to scopes.
    #[error("public-key kid {} must be bound to the scopes it serves", repr(.kid))]
    Unbound {
        /// The kid.
        kid: String,
    },
    /// `flenc_primaries` maps the empty scope.
    #[error("primaries map an empty scope to {}", repr(.kid))]
    PrimariesEmptyScope {
        /// The kid it maps to.
        kid: String,
    },
    /// `flenc_primaries` maps a scope to a kid that cannot seal.
    #[error("primaries map scope {} to {}, which is not a sealing key", repr(.scope), repr(.kid))]
    PrimariesNotSealing {
        /// The scope.
        scope: String,
        /// The kid.
        kid: String,
    },
    /// `flenc_primaries` maps a scope to a key bound to other scopes.
    #[error("primaries map scope {} to {}, which is not bound to it", repr(.scope), repr(.kid))]
    PrimariesNotBound {
        /// The scope.
        scope: String,
        /// The kid.
        kid: String,
    },
    /// `flenc_signing` maps the empty scope.
    #[error("signing maps an empty scope to {}", repr(.kid))]
    SigningEmptyScope {
        /// The kid it maps to.
        kid: String,
    },
    /// `flenc_signing` maps a scope to a kid that is not an Ed25519 key with its private half.
    #[error("signing maps scope {} to {}, which is not a private signing key", repr(.scope), repr(.kid))]
    SigningNotPrivate {
        /// The scope.
        scope: String,
        /// The kid.
        kid: String,
    },
    /// `flenc_signing` maps a scope to a signer bound to other scopes.
    #[error("signing maps scope {} to {}, which is not bound to it", repr(.scope), repr(.kid))]
    SigningNotBound {
        /// The scope.
        scope: String,
        /// The kid.
        kid: String,
    },
    /// No key of the kind asked for under this kid (Python's `UnknownKeyError`).
    #[error("no key {} in the active keyring", repr(.kid))]
    UnknownKey {
        /// The kid.
        kid: String,
    },
    /// The sealing key for a scope is bound to other scopes.
    #[error("key {} is bound to scopes {} and cannot seal {}", repr(.kid), repr_list(.bound.iter().map(String::as_str)), sealing_what(.scope))]
    CannotSeal {
        /// The sealing kid.
        kid: String,
        /// Its binding, sorted.
        bound: Vec<String>,
        /// The scope asked for (empty: unscoped).
        scope: String,
    },
    /// No signing key is configured for the scope.
    #[error("no signing key for scope {} in the active keyring", repr(.scope))]
    NoSigningKey {
        /// The scope.
        scope: String,
    },
    /// The private half of an X25519 or Ed25519 key does not belong to its public half.
    #[error("{kind} key {}: the private key does not match its public key", repr(.kid))]
    MismatchedHalves {
        /// `X25519` or `Ed25519`.
        kind: &'static str,
        /// The kid.
        kid: String,
    },
    /// An X25519 public key that gives an all-zero shared secret with any key: it cannot seal.
    #[error("X25519 key {} is a low-order point and cannot seal", repr(.kid))]
    LowOrderRecipient {
        /// The kid.
        kid: String,
    },
    /// An oct key has no public half to export.
    #[error("key {} is a symmetric (oct) key and has no public half", repr(.kid))]
    NoPublicHalf {
        /// The kid.
        kid: String,
    },
    /// A keyring password under 14 UTF-8 bytes.
    #[error("a keyring password must be at least 14 bytes")]
    ShortPassword,
    /// A password-protected keyring too large for a reader (its ciphertext over the JWE cap).
    #[error("the protected keyring's ciphertext would be {size} characters, over the {limit} a reader accepts")]
    TooLarge {
        /// Its size as base64url characters.
        size: usize,
        /// The reader's cap.
        limit: usize,
    },
    /// The operating system's random source failed (no key, IV or salt could be drawn).
    #[error("the operating system's random source failed")]
    NoRandomness,
    /// A password-protected keyring did not open: wrong password, damage, or another algorithm.
    #[error("cannot open the password-protected keyring — wrong password or damaged file")]
    CannotOpen {
        /// What failed.
        #[source]
        cause: Refusal,
    },
    /// An encrypted or signed attribute ran with no keyring: none bound to the application
    /// (the builder's `keyring(...)`), none installed in the process
    /// ([`install_keyring`](super::install_keyring)). Python's `KeyringNotInstalledError`.
    #[error("no keyring installed — give the application one (Flechtwerk::builder().keyring(...)) or call flechtwerk::secrets::install_keyring(...)")]
    NotInstalled,
    /// A second, different keyring installed in a process that has one (Python's
    /// `KeyringConflictError`).
    #[error("a different keyring is already installed in this process — one keyring per process")]
    Conflict,
}

fn sealing_what(scope: &str) -> String {
    if scope.is_empty() {
        "an unscoped value".to_owned()
    } else {
        format!("scope {}", repr(scope))
    }
}

/// A token could not be read, verified or written (Python's `SecretError` family).
///
/// `Format` variants are Python's `SecretFormatError`, [`SecretError::Decrypt`] its
/// `SecretDecryptError`, [`SecretError::Signature`] its `SecretSignatureError`;
/// [`SecretError::Keyring`] is a [`KeyringError`] met while sealing, opening or signing (Python
/// raises those unwrapped).
///
/// ```
/// use flechtwerk::secrets::{Keyring, SecretError};
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let token = keyring.encrypt(br#""s3cret""#, "api")?;
/// let err = keyring.decrypt(&token, "db").unwrap_err();
/// assert!(matches!(err, SecretError::Decrypt { .. }));
/// assert_eq!(
///     err.to_string(),
///     "cannot decrypt secret value; scope='db'; kid='k1'; scope mismatch: token scoped 'api', read as 'db'"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The keyring refused: no sealing or signing key for the scope, mismatched key halves.
    #[error(transparent)]
    Keyring(#[from] KeyringError),
    /// Not `flenc:jwe:` (resp. `flsig:jws:`): the envelope segment after the scheme is unknown.
    #[error("unknown {scheme} envelope {} — expected '{expected}'", repr(.envelope))]
    UnknownEnvelope {
        /// `flenc` or `flsig`.
        scheme: &'static str,
        /// What stood where the envelope should be.
        envelope: String,
        /// `jwe` or `jws`.
        expected: &'static str,
    },
    /// The protected header does not decode to a JSON object.
    #[error("malformed JWE header: {detail}")]
    MalformedHeader {
        /// What is wrong.
        detail: String,
    },
    /// The protected header has no non-empty string `kid`.
    #[error("JWE header carries no usable kid: {found}")]
    NoUsableKid {
        /// The `kid` found, as Python's `repr`.
        found: String,
    },
    /// A key-less lookup was given a value of the other kind, or no token at all.
    #[error("not a {expected} token")]
    NotAToken {
        /// `flenc`, `flsig` or `flenc or flsig`.
        expected: &'static str,
    },
    /// A `flenc:` token did not decrypt, or failed the scope ratchet or the key's binding.
    #[error("{}", detail("cannot decrypt secret value", .scope, .kid, .reason.as_ref().map(ToString::to_string)))]
    Decrypt {
        /// The scope the reader declared (empty: unscoped).
        scope: String,
        /// The kid the token names.
        kid: String,
        /// Why, when the token decrypted but was refused (the scope rules, a seal-only key).
        reason: Option<Box<DecryptReason>>,
        /// What failed below the scope rules (an unknown kid, the JOSE checks, the tag).
        #[source]
        cause: Option<Refusal>,
    },
    /// A `flsig:` token did not verify, or vouches for another scope.
    #[error("{}", detail("cannot verify signed value", .scope, .kid, .reason.as_ref().map(ToString::to_string)))]
    Signature {
        /// The scope the reader declared.
        scope: String,
        /// The signer's kid the token names.
        kid: String,
        /// Why, when the signature verified but was refused.
        reason: Option<Box<SignatureReason>>,
        /// What failed (an unknown signer, the JOSE checks, the signature).
        #[source]
        cause: Option<Refusal>,
    },
    /// `sign` and `verify` need a scope (Python raises `ValueError`).
    #[error("{verb} needs a non-empty scope — a signature always names the compartment it vouches for")]
    ScopeRequired {
        /// `sign` or `verify`.
        verb: &'static str,
    },
    /// A secret attribute holds a plaintext value and its codec does not tolerate one
    /// (`read_plaintext` off; Python's `PlaintextSecretError`). The record must be written again
    /// encrypted, and the value treated as exposed.
    #[error("{}", plain_detail("secret value is plaintext but read_plaintext is off for this attribute", .scope))]
    Plaintext {
        /// The attribute's scope (empty: unscoped).
        scope: String,
    },
    /// A signed attribute holds an unsigned value and its codec does not tolerate one
    /// (`read_unsigned` off; Python's `UnsignedSecretError`).
    #[error("{}", plain_detail("value is unsigned but read_unsigned is off for this attribute", .scope))]
    Unsigned {
        /// The attribute's scope.
        scope: String,
    },
    /// A decrypted (or verified) payload is not JSON, or not what the attribute's inner codec
    /// reads. The details stay out of the text: they could quote the secret.
    #[error("the secret value of scope {} does not decode: {what} (details withheld, they could quote the value)", repr(.scope))]
    Payload {
        /// The attribute's scope.
        scope: String,
        /// `not JSON`, or the JSON type the inner codec refused.
        what: String,
    },
    /// Writing refused: a reader would refuse the token for its size (Python writes it, then
    /// cannot read it back).
    #[error("the token's {part} would be {size} characters, over the {limit} a reader accepts")]
    TooLarge {
        /// `header` or `payload` (resp. `ciphertext`).
        part: &'static str,
        /// Its size as base64url characters.
        size: usize,
        /// The reader's cap.
        limit: usize,
    },
}

fn plain_detail(head: &str, scope: &str) -> String {
    if scope.is_empty() {
        head.to_owned()
    } else {
        format!("{head}; scope={}", repr(scope))
    }
}

fn detail(head: &str, scope: &str, kid: &str, reason: Option<String>) -> String {
    let mut parts = vec![head.to_owned()];
    if !scope.is_empty() {
        parts.push(format!("scope={}", repr(scope)));
    }
    parts.push(format!("kid={}", repr(kid)));
    if let Some(reason) = reason {
        parts.push(reason);
    }
    parts.join("; ")
}

/// Why a token that decrypted (or could have) was refused: the scope ratchet, the key's binding.
///
/// ```
/// use flechtwerk::secrets::{DecryptReason, Keyring, SecretError};
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let token = keyring.encrypt(b"1", "api")?;
/// let Err(SecretError::Decrypt { reason: Some(reason), .. }) = keyring.decrypt(&token, "") else { panic!() };
/// assert_eq!(*reason, DecryptReason::Downgrade { stamped: "api".into() });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecryptReason {
    /// The keyring holds only the recipient's public half.
    #[error("keyring holds only the public half of {}: it can seal but not open", repr(.kid))]
    PublicHalfOnly {
        /// The kid.
        kid: String,
    },
    /// The token is stamped with another scope than the reader's.
    #[error("scope mismatch: token scoped {}, read as {}", repr(.stamped), repr(.read))]
    ScopeMismatch {
        /// The token's scope.
        stamped: String,
        /// The reader's scope.
        read: String,
    },
    /// A scoped token read without a scope.
    #[error("token is scoped {} but this codec declares no scope (downgrade blocked)", repr(.stamped))]
    Downgrade {
        /// The token's scope.
        stamped: String,
    },
    /// The key is bound to scopes the token's stamp is not among.
    #[error("key {} is bound to scopes {}; token stamped {}", repr(.kid), repr_list(.bound.iter().map(String::as_str)), repr_opt(.stamped.as_deref()))]
    KeyBound {
        /// The kid.
        kid: String,
        /// Its binding, sorted.
        bound: Vec<String>,
        /// The token's scope (`None`: unscoped).
        stamped: Option<String>,
    },
}

/// Why a signature that verified was refused.
///
/// ```
/// use flechtwerk::secrets::{Keyring, SecretError, SignatureReason};
///
/// let keyring = Keyring::builder()
///     .oct("k1", &[7; 32])
///     .primary("k1")
///     .generate_ed25519("sig")
///     .bind("sig", ["api", "db"])
///     .signing_for("api", "sig")
///     .build()?;
/// let token = keyring.sign(b"1", "api")?;
/// let Err(SecretError::Signature { reason: Some(reason), .. }) = keyring.verify(&token, "db") else { panic!() };
/// assert!(matches!(*reason, SignatureReason::ScopeMismatch { .. }));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureReason {
    /// The token vouches for another scope (or none).
    #[error("scope mismatch: signature scoped {}, read as {}", repr_opt(.stamped.as_deref()), repr(.read))]
    ScopeMismatch {
        /// The token's scope (`None`: the header has none).
        stamped: Option<String>,
        /// The reader's scope.
        read: String,
    },
    /// The signer is bound to other scopes than the reader's.
    #[error("signer {} is bound to scopes {}", repr(.kid), repr_list(.bound.iter().map(String::as_str)))]
    SignerBound {
        /// The kid.
        kid: String,
        /// Its binding, sorted.
        bound: Vec<String>,
    },
}

/// What the JOSE layer refused, below the scope rules: the cause of a [`SecretError::Decrypt`],
/// [`SecretError::Signature`] or [`KeyringError::CannotOpen`]. Python gives these no text in the
/// error's message either; they are its `__cause__`.
///
/// ```
/// use flechtwerk::secrets::{Keyring, Refusal, SecretError};
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// let token = keyring.encrypt(b"1", "")?;
/// let tampered = token.replacen("..", ".AAAA.", 1); // a `dir` token with an encrypted key
/// let Err(SecretError::Decrypt { cause: Some(cause), reason: None, .. }) = keyring.decrypt(&tampered, "") else { panic!() };
/// assert_eq!(cause, Refusal::Length { part: "encrypted key" });
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The token names a kid the keyring lacks (Python's `UnknownKeyError`).
    #[error("no key {} in the active keyring", repr(.kid))]
    UnknownKey {
        /// The kid.
        kid: String,
    },
    /// Over a reader's size cap.
    #[error("the {part} is over the {limit} characters a reader accepts")]
    TooLarge {
        /// Which part.
        part: &'static str,
        /// The cap.
        limit: usize,
    },
    /// Not the number of `.`-separated segments of the serialization.
    #[error("not a compact serialization of {expected} segments")]
    Segments {
        /// 5 for a JWE, 3 for a JWS.
        expected: usize,
    },
    /// A segment is not strict unpadded base64url.
    #[error("the {part} is not unpadded base64url")]
    Base64 {
        /// Which part.
        part: &'static str,
    },
    /// The protected header is not a JSON object with `alg` (and `enc`).
    #[error("the protected header is not a JSON object naming its algorithms")]
    Header,
    /// A header member outside the JOSE registry (and `flenc_scope`).
    #[error("header member {} is not allowed", repr(.member))]
    UnsupportedMember {
        /// The member.
        member: String,
    },
    /// A registered header member of the wrong type or value.
    #[error("header member {} is malformed", repr(.member))]
    MemberValue {
        /// The member.
        member: String,
    },
    /// An algorithm outside the allowlist the key's kind selects.
    #[error("algorithm {} is not allowed", repr(.name))]
    Algorithm {
        /// The algorithm named (an `alg`, `enc` or `zip` value).
        name: String,
    },
    /// An unencoded payload (RFC 7797 `b64: false`).
    #[error("unencoded payloads (b64: false) are not accepted")]
    UnencodedPayload,
    /// A part of the wrong length (encrypted key, IV, tag, signature, ephemeral key).
    #[error("the {part} has the wrong length")]
    Length {
        /// Which part.
        part: &'static str,
    },
    /// The ephemeral X25519 key gives an all-zero shared secret.
    #[error("the ephemeral key is a low-order point")]
    LowOrder,
    /// AES key unwrap failed (wrong key or password, or damage).
    #[error("key unwrap failed")]
    Unwrap,
    /// The GCM tag or the Ed25519 signature did not verify.
    #[error("authentication failed")]
    Authentication,
    /// A keyring password under 14 UTF-8 bytes (checked before any key derivation).
    #[error("a keyring password must be at least 14 bytes")]
    ShortPassword,
    /// A protected keyring's content is not UTF-8.
    #[error("the content is not UTF-8")]
    NotUtf8,
}
