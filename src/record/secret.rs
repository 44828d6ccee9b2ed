//! The secret codecs (feature `secrets`): [`encrypted`] (Python's `ENCRYPTED`) and [`signed`]
//! (Python's `SIGNED`), which wrap any codec so the attribute's wire value is a token.
//!
//! **Lazy decryption.** A record keeps its fields as the JSON that arrived, and an attribute's
//! codec runs only when the field is read or written ([`Record::get`](super::Record::get),
//! [`require`](super::Record::require), [`set`](super::Record::set)). So an encrypted field is
//! decrypted when the stage reads it, every time it reads it, and never otherwise, as Python
//! decrypts on attribute access: decoding a message, cloning a record, carrying state forward
//! or storing it copies the token as it is (SEC-15), and a stage that never reads a secret never
//! needs the key. Nothing decrypted is cached in the record: the plaintext lives in the value
//! the read returns, owned by the caller.

use zeroize::Zeroize as _;

use super::attribute::{Codec, CodecError};
use crate::json::{self, Value};
use crate::secrets::{self, is_encrypted, is_signed, kid_of, signer_of, SecretError};

/// The codec of [`encrypted`]: the inner codec's value, written as its canonical JSON sealed
/// into a `flenc:jwe:` token under the keyring's sealing key for the scope.
///
/// ```
/// use flechtwerk::attribute::{encrypted, Attribute, EncryptedCodec, StrCodec, STR};
/// const CODEC: EncryptedCodec<StrCodec> = encrypted(STR).scope("db");
/// const PASSWORD: Attribute<String> = Attribute::new("password", &CODEC);
/// assert_eq!((CODEC.scope_name(), CODEC.reads_plaintext()), ("db", false));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct EncryptedCodec<C> {
    inner: C,
    scope: &'static str,
    read_plaintext: bool,
}

/// `ENCRYPTED(inner)`: the attribute's value is stored as a `flenc:jwe:` token (SEC-10). It
/// composes with every codec, both ways round: `encrypted(list(STR))` seals the whole list as
/// one token, `list(encrypted(STR))` each element as its own (SEC-14).
///
/// Encoding runs `inner`, writes its JSON canonically and seals it for the
/// [`scope`](EncryptedCodec::scope) with a fresh IV (two writes of one value differ). Decoding
/// opens a `flenc:` value under the scope's ratchet and decodes the JSON through `inner`; a
/// value that is not a token is refused ([`SecretError::Plaintext`]) unless
/// [`read_plaintext`](EncryptedCodec::read_plaintext) tolerates it. The keyring is the
/// application's (the builder's `keyring(...)`), else the process's
/// ([`install_keyring`](crate::secrets::install_keyring)).
///
/// ```
/// use flechtwerk::attribute::{encrypted, list, Attribute, STR};
/// use flechtwerk::secrets::{is_encrypted, with_keyring, Keyring};
/// use flechtwerk::Config;
///
/// const API_KEY: Attribute<String> = Attribute::new("api_key", &encrypted(STR));
/// const HOSTS: Attribute<Vec<String>> = Attribute::new("hosts", &list(encrypted(STR)));
///
/// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
/// with_keyring(&keyring, || -> Result<(), Box<dyn std::error::Error>> {
///     let config = Config::new()
///         .with(&API_KEY, "hunter2".to_owned())?
///         .with(&HOSTS, vec!["a".to_owned(), "b".to_owned()])?;
///     let flechtwerk::json::Value::Str(wire) = &config.raw()["api_key"] else { panic!() };
///     assert!(is_encrypted(wire)); // the rest of the record stays readable JSON
///     assert_eq!(config.require(&API_KEY)?, "hunter2"); // decrypted here, when read
///     assert_eq!(config.require(&HOSTS)?, ["a", "b"]);
///     Ok(())
/// })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const fn encrypted<C>(inner: C) -> EncryptedCodec<C> {
    EncryptedCodec { inner, scope: "", read_plaintext: false }
}

/// The settings, as `const fn`s so attributes stay constants (the inner codec is `Copy`, as
/// every codec of the library is).
impl<C: Copy> EncryptedCodec<C> {
    /// Stamps the tokens with `scope` (Python's `scope=`): a token of one scope is refused by a
    /// codec of another, and an unscoped codec refuses every scoped token; a scoped codec still
    /// reads unscoped tokens, so a scope can be added to a field already encrypted (the ratchet,
    /// SEC-12).
    ///
    /// ```
    /// use flechtwerk::attribute::{encrypted, Attribute, STR};
    /// const PASSWORD: Attribute<String> = Attribute::new("password", &encrypted(STR).scope("db"));
    /// ```
    pub const fn scope(self, scope: &'static str) -> Self {
        EncryptedCodec { inner: self.inner, scope, read_plaintext: self.read_plaintext }
    }

    /// Tolerates a plaintext value on read, during a migration to ciphertext (Python's
    /// `read_plaintext=True`): it is decoded through the inner codec, logged as a warning
    /// (without the value) and reported as `secret_plaintext_read(scope)` (SEC-13). Writes still
    /// encrypt.
    ///
    /// ```
    /// use flechtwerk::attribute::{encrypted, Attribute, STR};
    /// use flechtwerk::Config;
    /// const TOKEN: Attribute<String> = Attribute::new("token", &encrypted(STR).read_plaintext());
    /// let legacy = Config::wrap(match flechtwerk::json::parse(r#"{"token": "in clear"}"#)? {
    ///     flechtwerk::json::Value::Object(map) => map,
    ///     _ => unreachable!(),
    /// });
    /// assert_eq!(legacy.require(&TOKEN)?, "in clear"); // no keyring needed for a plaintext value
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn read_plaintext(self) -> Self {
        EncryptedCodec { inner: self.inner, scope: self.scope, read_plaintext: true }
    }
}

impl<C> EncryptedCodec<C> {
    /// The scope tokens are stamped with (empty: unscoped).
    ///
    /// ```
    /// use flechtwerk::attribute::{encrypted, STR};
    /// assert_eq!(encrypted(STR).scope_name(), "");
    /// ```
    pub const fn scope_name(&self) -> &'static str {
        self.scope
    }

    /// Whether a plaintext value is tolerated on read.
    ///
    /// ```
    /// use flechtwerk::attribute::{encrypted, STR};
    /// assert!(encrypted(STR).read_plaintext().reads_plaintext());
    /// ```
    pub const fn reads_plaintext(&self) -> bool {
        self.read_plaintext
    }

    /// The token a typed write of `value` stores (Python's `encrypt_value(attribute, value)`):
    /// for writers that build their JSON without a record.
    ///
    /// ```
    /// use flechtwerk::attribute::{encrypted, EncryptedCodec, StrCodec, STR};
    /// use flechtwerk::secrets::{is_encrypted, with_keyring, Keyring};
    /// const API_KEY: EncryptedCodec<StrCodec> = encrypted(STR).scope("vendor");
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// let token = with_keyring(&keyring, || API_KEY.encrypt_value(&"hunter2".to_owned()))?;
    /// assert!(is_encrypted(&token));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encrypt_value<V>(&self, value: &V) -> Result<String, CodecError>
    where
        C: Codec<V>,
    {
        match Codec::<V>::encode(self, value)? {
            Value::Str(token) => Ok(token),
            _ => unreachable!("the encrypted codec writes a token string"),
        }
    }

    /// Re-seals `token` for this codec's scope under the keyring's current sealing key (Python's
    /// `reencrypt(token, attribute)`, SEC-31): opened with the key it names, under this scope's
    /// ratchet, and sealed again, the payload's bytes unchanged. It promotes an unscoped token
    /// into the scope; it never strips one. Reports one `secret_decrypted`.
    ///
    /// ```
    /// use flechtwerk::attribute::{encrypted, EncryptedCodec, StrCodec, STR};
    /// use flechtwerk::secrets::{kid_of, with_keyring, Keyring};
    /// const API_KEY: EncryptedCodec<StrCodec> = encrypted(STR).scope("vendor");
    /// let old = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// let token = with_keyring(&old, || API_KEY.encrypt_value(&"hunter2".to_owned()))?;
    /// let rotated = old.to_builder().generate_oct("k2").primary("k2").build()?;
    /// let resealed = with_keyring(&rotated, || API_KEY.reencrypt(&token))?;
    /// assert_eq!(kid_of(&resealed)?, "k2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reencrypt(&self, token: &str) -> Result<String, SecretError> {
        let keyring = secrets::active_keyring()?;
        let payload = keyring.decrypt(token, self.scope)?;
        let kid = kid_of(token).unwrap_or_default();
        secrets::report(|events| events.decrypted(self.scope, &kid));
        keyring.encrypt(&payload, self.scope)
    }
}

/// The inner codec's JSON, canonical, in memory wiped when dropped.
fn payload_of<V, C: Codec<V>>(inner: &C, value: &V, scope: &str) -> Result<zeroize::Zeroizing<Vec<u8>>, CodecError> {
    let mut encoded = inner.encode(value).map_err(|e| withheld(e, scope))?;
    let mut out = zeroize::Zeroizing::new(Vec::new());
    let written = json::write_canonical(&encoded, &mut out);
    wipe(&mut encoded);
    written.map_err(|_| payload_error(scope, "not JSON compliant".to_owned()))?;
    Ok(out)
}

/// Parses a decrypted payload and decodes it through `inner`, wiping the parsed copy after.
fn decode_payload<V, C: Codec<V>>(inner: &C, payload: &[u8], scope: &str) -> Result<V, CodecError> {
    let text = std::str::from_utf8(payload).map_err(|_| payload_error(scope, "not UTF-8".to_owned()))?;
    let mut parsed = json::parse(text).map_err(|_| payload_error(scope, "not JSON".to_owned()))?;
    let decoded = inner.decode(&parsed).map_err(|e| withheld(e, scope));
    wipe(&mut parsed);
    decoded
}

fn payload_error(scope: &str, what: String) -> CodecError {
    CodecError::Secret(SecretError::Payload { scope: scope.to_owned(), what })
}

/// An inner codec's error about a secret value, its details withheld (an out-of-range integer,
/// a date that does not parse or a custom codec's text could quote the value).
fn withheld(error: CodecError, scope: &str) -> CodecError {
    match error {
        CodecError::WrongType { expected, found } => {
            payload_error(scope, format!("expected {expected}, found {found}"))
        }
        CodecError::Secret(inner) => CodecError::Secret(inner),
        _ => payload_error(scope, "refused by the inner codec".to_owned()),
    }
}

fn wipe(value: &mut Value) {
    match value {
        Value::Str(s) => s.zeroize(),
        Value::List(items) => items.iter_mut().for_each(wipe),
        Value::Object(map) => map.values_mut().for_each(wipe),
        _ => {}
    }
}

impl<V, C: Codec<V>> Codec<V> for EncryptedCodec<C> {
    fn decode(&self, raw: &Value) -> Result<V, CodecError> {
        match raw {
            Value::Str(token) if is_encrypted(token) => {
                let keyring = secrets::active_keyring().map_err(SecretError::from)?;
                let payload = keyring.decrypt(token, self.scope)?;
                // The kid read here cannot fail: the token just opened.
                let kid = kid_of(token).unwrap_or_default();
                secrets::report(|events| events.decrypted(self.scope, &kid));
                decode_payload(&self.inner, &payload, self.scope)
            }
            plain if self.read_plaintext => {
                tracing::warn!(
                    scope = self.scope,
                    "secret value read as legacy plaintext — migrate this record to ciphertext"
                );
                secrets::report(|events| events.plaintext_read(self.scope));
                self.inner.decode(plain).map_err(|e| withheld(e, self.scope))
            }
            _ => Err(SecretError::Plaintext { scope: self.scope.to_owned() }.into()),
        }
    }

    fn encode(&self, value: &V) -> Result<Value, CodecError> {
        let keyring = secrets::active_keyring().map_err(SecretError::from)?;
        let payload = payload_of(&self.inner, value, self.scope)?;
        Ok(Value::Str(keyring.encrypt(&payload, self.scope)?))
    }
}

/// The codec of [`signed`]: the inner codec's value, written as its canonical JSON signed into
/// a `flsig:jws:` token by the keyring's signer for the scope.
///
/// ```
/// use flechtwerk::attribute::{signed, Attribute, SignedCodec, StrCodec, STR};
/// const CODEC: SignedCodec<StrCodec> = signed(STR, "payouts");
/// const IBAN: Attribute<String> = Attribute::new("iban", &CODEC);
/// assert_eq!(CODEC.scope_name(), "payouts");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct SignedCodec<C> {
    inner: C,
    scope: &'static str,
    read_unsigned: bool,
}

/// `SIGNED(inner, scope=...)`: the attribute's value is stored as an Ed25519-signed
/// `flsig:jws:` token, signed by the keyring's signer for `scope` and accepted on read from any
/// signer bound to exactly that scope. It vouches for who wrote the value (anyone holding a
/// recipient's public key can seal, only a signer can sign). The recommended composition is
/// sign-then-encrypt: `encrypted(signed(inner, "s")).scope("s")`. An empty scope is refused
/// when the codec runs ([`SecretError::ScopeRequired`]).
///
/// ```
/// use flechtwerk::attribute::{signed, Attribute, STR};
/// use flechtwerk::secrets::{with_keyring, Keyring};
/// use flechtwerk::Config;
///
/// const IBAN: Attribute<String> = Attribute::new("iban", &signed(STR, "payouts"));
/// let keyring = Keyring::builder()
///     .oct("k1", &[7; 32]).primary("k1")
///     .generate_ed25519("sig-1").bind("sig-1", ["payouts"]).signing_for("payouts", "sig-1")
///     .build()?;
/// let config = with_keyring(&keyring, || Config::new().with(&IBAN, "DE02 1203".to_owned()))?;
/// assert_eq!(with_keyring(&keyring, || config.require(&IBAN))?, "DE02 1203");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const fn signed<C>(inner: C, scope: &'static str) -> SignedCodec<C> {
    SignedCodec { inner, scope, read_unsigned: false }
}

impl<C: Copy> SignedCodec<C> {
    /// Tolerates an unsigned value on read during a migration (Python's `read_unsigned=True`):
    /// decoded through the inner codec, logged as a warning and reported as
    /// `secret_unsigned_read(scope)`.
    ///
    /// ```
    /// use flechtwerk::attribute::{signed, STR};
    /// assert!(signed(STR, "payouts").read_unsigned().reads_unsigned());
    /// ```
    pub const fn read_unsigned(self) -> Self {
        SignedCodec { inner: self.inner, scope: self.scope, read_unsigned: true }
    }
}

impl<C> SignedCodec<C> {
    /// The scope signatures vouch for.
    ///
    /// ```
    /// use flechtwerk::attribute::{signed, STR};
    /// assert_eq!(signed(STR, "payouts").scope_name(), "payouts");
    /// ```
    pub const fn scope_name(&self) -> &'static str {
        self.scope
    }

    /// Whether an unsigned value is tolerated on read.
    ///
    /// ```
    /// use flechtwerk::attribute::{signed, STR};
    /// assert!(!signed(STR, "payouts").reads_unsigned());
    /// ```
    pub const fn reads_unsigned(&self) -> bool {
        self.read_unsigned
    }
}

impl<V, C: Codec<V>> Codec<V> for SignedCodec<C> {
    fn decode(&self, raw: &Value) -> Result<V, CodecError> {
        if self.scope.is_empty() {
            return Err(SecretError::ScopeRequired { verb: "verify" }.into());
        }
        match raw {
            Value::Str(token) if is_signed(token) => {
                let keyring = secrets::active_keyring().map_err(SecretError::from)?;
                let payload = zeroize::Zeroizing::new(keyring.verify(token, self.scope)?);
                let kid = signer_of(token).unwrap_or_default();
                secrets::report(|events| events.verified(self.scope, &kid));
                decode_payload(&self.inner, &payload, self.scope)
            }
            plain if self.read_unsigned => {
                tracing::warn!(scope = self.scope, "signed value read unsigned — migrate this record to a signed one");
                secrets::report(|events| events.unsigned_read(self.scope));
                self.inner.decode(plain).map_err(|e| withheld(e, self.scope))
            }
            _ => Err(SecretError::Unsigned { scope: self.scope.to_owned() }.into()),
        }
    }

    fn encode(&self, value: &V) -> Result<Value, CodecError> {
        if self.scope.is_empty() {
            return Err(SecretError::ScopeRequired { verb: "sign" }.into());
        }
        let keyring = secrets::active_keyring().map_err(SecretError::from)?;
        let payload = payload_of(&self.inner, value, self.scope)?;
        Ok(Value::Str(keyring.sign(&payload, self.scope)?))
    }
}
