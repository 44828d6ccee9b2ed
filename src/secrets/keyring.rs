//! The keyring: which keys there are, which one seals each scope, which one signs it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use zeroize::{Zeroize as _, Zeroizing};

use super::error::{KeyringError, Refusal, SecretError};
use super::jose::{self, Profile, Secret};
use super::text::{b64url, decode_key_material, push_json_str, py_type, repr, repr_value};
use crate::json::{self, Map, Value};

/// The key material of one kid.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Material {
    /// A 32-byte AES-256 key: seals and opens `dir` tokens.
    Oct(Secret),
    /// An X25519 recipient: the public half seals, the private half opens.
    X25519 { public: [u8; 32], private: Option<Secret> },
    /// An Ed25519 signer: the private half (the seed) signs, the public half verifies.
    Ed25519 { public: [u8; 32], private: Option<Secret> },
}

impl Material {
    fn kind(&self) -> &'static str {
        match self {
            Material::Oct(_) => "oct",
            Material::X25519 { .. } => "x25519",
            Material::Ed25519 { .. } => "ed25519",
        }
    }

    fn has_private(&self) -> bool {
        match self {
            Material::Oct(_) => true,
            Material::X25519 { private, .. } | Material::Ed25519 { private, .. } => private.is_some(),
        }
    }
}

/// One key of the keyring and the scopes it is bound to (none: unbound, oct keys only).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) material: Material,
    pub(crate) bound: Option<BTreeSet<String>>,
    /// Whether a private half belongs to its public half (checked once, when built; refused
    /// when the key is used, as flechtctl does).
    pub(crate) halves_match: bool,
}

/// The keys of an application and which of them seals and signs each scope — Python's
/// `flechtctl.Keyring`, with its JWK Set file form.
///
/// A keyring holds three kinds of key, each named by a kid unique across all kinds: 32-byte
/// **oct** keys (`dir` + `A256GCM` tokens), **X25519 recipients** (`ECDH-ES+A256KW` tokens: the
/// public half seals, the private half opens) and **Ed25519 signers** (`flsig:` tokens). Any key
/// may be *bound* to the scopes it serves; X25519 and Ed25519 keys must be. The `primary` seals
/// every scope that `primaries` does not map to its own key; `signing` names each scope's
/// signer.
///
/// Build one from a JWK Set document ([`Keyring::from_json`], the deployment path: the
/// application reads the text from wherever it keeps it), from a password-protected one
/// ([`Keyring::from_protected`]), or from key bytes ([`Keyring::builder`]). Every malformation is
/// a named [`KeyringError`]. Key bytes are wiped from memory when the keyring is dropped, and
/// neither `Debug` nor any error shows them.
///
/// ```
/// use flechtwerk::secrets::Keyring;
///
/// let keyring = Keyring::from_json(r#"{
///     "keys": [{"kty": "oct", "kid": "k-2026", "k": "USAnUCqV4nHUS88IGPl4kP0mwcOWqOqobGtIZqGGNGM"}],
///     "primary": "k-2026"
/// }"#)?;
/// let token = keyring.encrypt(br#""hunter2""#, "db")?; // the value's JSON bytes, its scope
/// assert!(token.starts_with("flenc:jwe:"));
/// assert_eq!(keyring.decrypt(&token, "db")?.as_bytes(), br#""hunter2""#);
/// assert!(!format!("{keyring:?}").contains("USAnUCqV4nHUS88IGPl4kP0mwcOWqOqobGtIZqGGNGM"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Keyring {
    pub(crate) entries: BTreeMap<String, Entry>,
    primary: String,
    primaries: BTreeMap<String, String>,
    signing: BTreeMap<String, String>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Key<'a>(&'a str, &'a Entry);
        impl fmt::Debug for Key<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct("Key")
                    .field("kid", &self.0)
                    .field("kind", &self.1.material.kind())
                    .field("private", &self.1.material.has_private())
                    .field("bound", &self.1.bound)
                    .finish()
            }
        }
        f.debug_struct("Keyring")
            .field("primary", &self.primary)
            .field("primaries", &self.primaries)
            .field("signing", &self.signing)
            .field("keys", &self.entries.iter().map(|(kid, e)| Key(kid, e)).collect::<Vec<_>>())
            .finish()
    }
}

impl Keyring {
    /// A builder from key bytes (Python's `Keyring.of`); [`KeyringBuilder::build`] validates.
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// assert_eq!(keyring.primary(), "k1");
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn builder() -> KeyringBuilder {
        KeyringBuilder::default()
    }

    /// A builder holding this keyring's keys and designations, to derive a changed keyring
    /// (a new primary, a key added or removed) — what `flechtctl keyring add|remove|primary` do.
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let old = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// let rotated = old.to_builder().generate_oct("k2").primary("k2").build()?;
    /// assert_eq!(rotated.kids().collect::<Vec<_>>(), ["k1", "k2"]);
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn to_builder(&self) -> KeyringBuilder {
        let mut builder = KeyringBuilder::default();
        for (kid, entry) in &self.entries {
            let (kind, public, private) = match &entry.material {
                Material::Oct(key) => (Kind::Oct, Zeroizing::new(key.to_vec()), None),
                Material::X25519 { public, private } => {
                    (Kind::X25519, Zeroizing::new(public.to_vec()), private.as_ref())
                }
                Material::Ed25519 { public, private } => {
                    (Kind::Ed25519, Zeroizing::new(public.to_vec()), private.as_ref())
                }
            };
            builder.keys.push(RawKey {
                kid: kid.clone(),
                kind,
                material: public,
                private: private.map(|p| Zeroizing::new(p.to_vec())),
            });
            if let Some(bound) = &entry.bound {
                builder.bindings.push((kid.clone(), bound.iter().cloned().collect()));
            }
        }
        builder.primary = Primary::Kid(self.primary.clone());
        builder.primaries = self.primaries.iter().map(|(s, k)| (s.clone(), k.clone())).collect();
        builder.signing = self.signing.iter().map(|(s, k)| (s.clone(), k.clone())).collect();
        builder
    }

    /// Parses a JWK Set document with flechtctl's extension members (`primary`, and optionally
    /// `flenc_primaries`, `flenc_signing` and per key `flenc_scopes`); unknown members are
    /// ignored. Refuses a password-protected document ([`KeyringError::PasswordProtected`]).
    ///
    /// ```
    /// use flechtwerk::secrets::{Keyring, KeyringError};
    ///
    /// let err = Keyring::from_json(r#"{"keys": [{"kty": "RSA", "kid": "a"}], "primary": "a"}"#).unwrap_err();
    /// assert!(matches!(err, KeyringError::UnsupportedKeyType { .. }));
    /// ```
    pub fn from_json(text: &str) -> Result<Keyring, KeyringError> {
        if is_protected_keyring(text) {
            return Err(KeyringError::PasswordProtected);
        }
        let mut doc = match json::parse(text) {
            Ok(Value::Object(doc)) => doc,
            Ok(mut other) => {
                wipe(&mut other);
                return Err(KeyringError::NotObject { got: py_type(Some(&other)) });
            }
            Err(e) => return Err(KeyringError::NotJson { detail: e.to_string() }),
        };
        let keyring = Keyring::from_document(&doc);
        doc.values_mut().for_each(wipe);
        keyring
    }

    fn from_document(doc: &Map) -> Result<Keyring, KeyringError> {
        let raw_keys = match doc.get("keys") {
            None => &[][..],
            Some(Value::List(keys)) => &keys[..],
            Some(_) => return Err(KeyringError::KeysNotArray),
        };
        let mut builder = KeyringBuilder::default();
        for jwk in raw_keys {
            builder.parse_jwk(jwk)?;
        }
        builder.primary = match doc.get("primary") {
            None => return Err(KeyringError::NoPrimary),
            Some(Value::Str(kid)) => Primary::Kid(kid.clone()),
            Some(other) => Primary::NotAString(repr_value(Some(other))),
        };
        builder.primaries = scope_map(doc, "flenc_primaries")?;
        builder.signing = scope_map(doc, "flenc_signing")?;
        builder.build()
    }

    /// This keyring as flechtctl writes the file: a JWK Set, members sorted at every level, keys
    /// sorted by kid, two-space indent, non-ASCII escaped, a final newline;
    /// `Keyring::from_json(&k.to_json()) == k`. It holds the private halves: the file form, not a
    /// shareable one (the buffer is wiped when dropped).
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder().oct("k1", &[0; 32]).primary("k1").build()?;
    /// assert_eq!(
    ///     keyring.to_json().as_str(),
    ///     "{\n  \"keys\": [\n    {\n      \"k\": \"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\",\n      \"kid\": \"k1\",\n      \"kty\": \"oct\"\n    }\n  ],\n  \"primary\": \"k1\"\n}\n"
    /// );
    /// assert_eq!(Keyring::from_json(&keyring.to_json())?, keyring);
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn to_json(&self) -> Zeroizing<String> {
        let mut out = Zeroizing::new(String::with_capacity(256 + 320 * self.entries.len()));
        out.push_str("{\n");
        for (member, map) in [("flenc_primaries", &self.primaries), ("flenc_signing", &self.signing)] {
            if map.is_empty() {
                continue;
            }
            out.push_str(&format!("  \"{member}\": {{\n"));
            let items: Vec<String> = map
                .iter()
                .map(|(scope, kid)| {
                    let mut item = String::from("    ");
                    push_json_str(&mut item, scope);
                    item.push_str(": ");
                    push_json_str(&mut item, kid);
                    item
                })
                .collect();
            out.push_str(&items.join(",\n"));
            out.push_str("\n  },\n");
        }
        out.push_str("  \"keys\": [\n");
        let mut first = true;
        for (kid, entry) in &self.entries {
            if !first {
                out.push_str(",\n");
            }
            first = false;
            write_jwk(&mut out, kid, entry, true, "    ");
        }
        out.push_str("\n  ],\n  \"primary\": ");
        push_json_str(&mut out, &self.primary);
        out.push_str("\n}\n");
        out
    }

    /// The public half of an X25519 or Ed25519 key as one JWK with its sorted `flenc_scopes`,
    /// written as `flechtctl keyring export` prints it (indent 2, members sorted, a final
    /// newline); never a private half. An oct key has none ([`KeyringError::NoPublicHalf`]).
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder()
    ///     .oct("k1", &[7; 32])
    ///     .primary("k1")
    ///     .generate_x25519("rec")
    ///     .bind("rec", ["api"])
    ///     .build()?;
    /// let jwk = keyring.public_jwk("rec")?;
    /// assert!(jwk.contains("\"crv\": \"X25519\"") && !jwk.contains("\"d\""));
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn public_jwk(&self, kid: &str) -> Result<String, KeyringError> {
        let entry = self.entries.get(kid).ok_or_else(|| KeyringError::UnknownKey { kid: kid.to_owned() })?;
        if let Material::Oct(_) = entry.material {
            return Err(KeyringError::NoPublicHalf { kid: kid.to_owned() });
        }
        let mut out = String::new();
        write_jwk(&mut out, kid, entry, false, "");
        out.push('\n');
        Ok(out)
    }

    /// The kid that seals values of `scope`: `primaries[scope]`, else the primary; refused when
    /// that key is bound and `scope` is not among its scopes (an unscoped value, `""`, is
    /// outside every binding).
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder()
    ///     .oct("k1", &[1; 32])
    ///     .oct("db-key", &[2; 32])
    ///     .bind("db-key", ["db"])
    ///     .primary("k1")
    ///     .primary_for("db", "db-key")
    ///     .build()?;
    /// assert_eq!(keyring.sealing_kid("db")?, "db-key");
    /// assert_eq!(keyring.sealing_kid("api")?, "k1");
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn sealing_kid(&self, scope: &str) -> Result<&str, KeyringError> {
        let kid = self.primaries.get(scope).unwrap_or(&self.primary);
        if let Some(bound) = self.entries.get(kid).and_then(|e| e.bound.as_ref()) {
            if !bound.contains(scope) {
                return Err(KeyringError::CannotSeal {
                    kid: kid.clone(),
                    bound: bound.iter().cloned().collect(),
                    scope: scope.to_owned(),
                });
            }
        }
        Ok(kid)
    }

    /// The kid that signs values of `scope`, or [`KeyringError::NoSigningKey`].
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder().oct("k1", &[1; 32]).primary("k1").build()?;
    /// assert!(keyring.signing_kid("api").is_err());
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn signing_kid(&self, scope: &str) -> Result<&str, KeyringError> {
        self.signing
            .get(scope)
            .map(String::as_str)
            .ok_or_else(|| KeyringError::NoSigningKey { scope: scope.to_owned() })
    }

    /// The primary kid (an oct key or an X25519 recipient).
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder().oct("k1", &[1; 32]).primary("k1").build()?;
    /// assert_eq!(keyring.primary(), "k1");
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn primary(&self) -> &str {
        &self.primary
    }

    /// Every kid of every kind, sorted (the labels of the keys-loaded gauge).
    ///
    /// ```
    /// use flechtwerk::secrets::Keyring;
    ///
    /// let keyring = Keyring::builder().oct("b", &[1; 32]).oct("a", &[2; 32]).primary("b").build()?;
    /// assert_eq!(keyring.kids().collect::<Vec<_>>(), ["a", "b"]);
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn kids(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.keys().map(String::as_str)
    }

    /// This keyring as a password-protected document (an encrypted JWK Set, RFC 7517 §7):
    /// a compact JWE of [`to_json`](Self::to_json)'s text under `PBES2-HS512+A256KW` (210,000
    /// iterations, a fresh 16-byte salt) + `A256GCM`, header `cty` `jwk-set+json`, as flechtctl
    /// writes it (the file adds one newline). The password must have at least 14 UTF-8 bytes.
    ///
    /// ```
    /// use flechtwerk::secrets::{is_protected_keyring, Keyring};
    ///
    /// let keyring = Keyring::builder().oct("k1", &[1; 32]).primary("k1").build()?;
    /// let file = keyring.to_protected("correct horse battery staple")?;
    /// assert!(is_protected_keyring(&file));
    /// assert_eq!(Keyring::from_protected(&file, "correct horse battery staple")?, keyring);
    /// assert!(Keyring::from_protected(&file, "correct horse battery stapler").is_err());
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn to_protected(&self, password: &str) -> Result<String, KeyringError> {
        if password.len() < jose::PASSWORD_MIN_BYTES {
            return Err(KeyringError::ShortPassword);
        }
        let text = self.to_json();
        let size = jose::b64_len(text.len());
        if size > jose::JWE_CIPHERTEXT_MAX {
            return Err(KeyringError::TooLarge { size, limit: jose::JWE_CIPHERTEXT_MAX });
        }
        jose::seal_pbes2(password.as_bytes(), text.as_bytes()).map_err(|e| match e {
            SecretError::Keyring(e) => e,
            _ => KeyringError::TooLarge { size, limit: jose::JWE_CIPHERTEXT_MAX },
        })
    }

    /// Opens a password-protected keyring document (surrounding whitespace ignored). Every
    /// failure to open it is [`KeyringError::CannotOpen`] with the reason as its source; the
    /// document inside then meets [`from_json`](Self::from_json)'s checks. Accepts what
    /// flechtctl accepts: any salt, 1 to 300,000 iterations (under 1,000 with a warning).
    ///
    /// ```
    /// use flechtwerk::secrets::{Keyring, KeyringError};
    ///
    /// let err = Keyring::from_protected("not a keyring", "correct horse battery staple").unwrap_err();
    /// assert!(matches!(err, KeyringError::CannotOpen { .. }));
    /// ```
    pub fn from_protected(text: &str, password: &str) -> Result<Keyring, KeyringError> {
        let cannot = |cause| KeyringError::CannotOpen { cause };
        if password.len() < jose::PASSWORD_MIN_BYTES {
            return Err(cannot(Refusal::ShortPassword));
        }
        let jwe = jose::parse_jwe(text.trim(), Profile::Pbes2).map_err(cannot)?;
        let plaintext = jwe.open_pbes2(password.as_bytes()).map_err(cannot)?;
        let text = std::str::from_utf8(&plaintext).map_err(|_| cannot(Refusal::NotUtf8))?;
        Keyring::from_json(text)
    }
}

fn scope_map(doc: &Map, member: &'static str) -> Result<Vec<(String, String)>, KeyringError> {
    match doc.get(member) {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(scope, kid)| match kid {
                Value::Str(kid) => Ok((scope.clone(), kid.clone())),
                _ => Err(KeyringError::BadScopeMap { member }),
            })
            .collect(),
        Some(_) => Err(KeyringError::BadScopeMap { member }),
    }
}

/// One JWK, members sorted, at `indent` (its first line unindented when `indent` is empty).
fn write_jwk(out: &mut String, kid: &str, entry: &Entry, private: bool, indent: &str) {
    let mut members: Vec<(&str, Zeroizing<String>)> = Vec::with_capacity(7);
    let quoted = |s: &str| {
        let mut q = Zeroizing::new(String::new());
        push_json_str(&mut q, s);
        q
    };
    let material = |bytes: &[u8]| {
        let encoded = Zeroizing::new(b64url(bytes));
        quoted(encoded.as_str())
    };
    match &entry.material {
        Material::Oct(key) => {
            members.push(("k", material(&key[..])));
            members.push(("kty", quoted("oct")));
        }
        Material::X25519 { public, private: half } | Material::Ed25519 { public, private: half } => {
            let crv = if let Material::X25519 { .. } = entry.material { "X25519" } else { "Ed25519" };
            members.push(("crv", quoted(crv)));
            if let (true, Some(half)) = (private, half) {
                members.push(("d", material(&half[..])));
            }
            members.push(("kty", quoted("OKP")));
            members.push(("x", material(&public[..])));
        }
    }
    members.push(("kid", quoted(kid)));
    if let Some(bound) = &entry.bound {
        let scopes: Vec<String> = bound
            .iter()
            .map(|s| {
                let mut item = format!("{indent}    ");
                push_json_str(&mut item, s);
                item
            })
            .collect();
        members.push(("flenc_scopes", Zeroizing::new(format!("[\n{}\n{indent}  ]", scopes.join(",\n")))));
    }
    members.sort_by(|a, b| a.0.cmp(b.0));
    out.push_str(indent);
    out.push_str("{\n");
    for (i, (name, value)) in members.iter().enumerate() {
        out.push_str(indent);
        out.push_str("  \"");
        out.push_str(name);
        out.push_str("\": ");
        out.push_str(value);
        out.push_str(if i + 1 < members.len() { ",\n" } else { "\n" });
    }
    out.push_str(indent);
    out.push('}');
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Oct,
    X25519,
    Ed25519,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Oct => "oct",
            Kind::X25519 => "X25519",
            Kind::Ed25519 => "Ed25519",
        }
    }
}

/// A key as given, not yet checked (any length).
#[derive(Clone)]
struct RawKey {
    kid: String,
    kind: Kind,
    /// The oct key, or the public half.
    material: Zeroizing<Vec<u8>>,
    private: Option<Zeroizing<Vec<u8>>>,
}

#[derive(Clone, Default)]
enum Primary {
    #[default]
    Missing,
    Kid(String),
    /// A document's `primary` that is not a string, as Python's `repr`.
    NotAString(String),
}

/// Builds a [`Keyring`] from key bytes; [`build`](Self::build) checks everything
/// [`Keyring::from_json`] checks, in the same order, with the same errors.
///
/// Key bytes are copied into memory that is wiped on drop; the caller's copies are the caller's.
///
/// ```
/// use flechtwerk::secrets::Keyring;
///
/// let keyring = Keyring::builder()
///     .oct("k-2026", &[7; 32])
///     .primary("k-2026")
///     .generate_x25519("rec-api") // a fresh pair: public half seals, private half opens
///     .bind("rec-api", ["api"])
///     .primary_for("api", "rec-api")
///     .generate_ed25519("sig-api")
///     .bind("sig-api", ["api"])
///     .signing_for("api", "sig-api")
///     .build()?;
/// assert_eq!(keyring.sealing_kid("api")?, "rec-api");
/// assert_eq!(keyring.signing_kid("api")?, "sig-api");
/// # Ok::<(), flechtwerk::secrets::KeyringError>(())
/// ```
#[derive(Clone, Default)]
pub struct KeyringBuilder {
    keys: Vec<RawKey>,
    primary: Primary,
    primaries: Vec<(String, String)>,
    bindings: Vec<(String, Vec<String>)>,
    signing: Vec<(String, String)>,
    failed: Option<KeyringError>,
}

impl fmt::Debug for KeyringBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyringBuilder")
            .field("kids", &self.keys.iter().map(|k| (k.kid.as_str(), k.kind.name())).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl KeyringBuilder {
    fn push(mut self, kid: &str, kind: Kind, material: &[u8], private: Option<&[u8]>) -> Self {
        self.keys.push(RawKey {
            kid: kid.to_owned(),
            kind,
            material: Zeroizing::new(material.to_vec()),
            private: private.map(|p| Zeroizing::new(p.to_vec())),
        });
        self
    }

    /// Adds a 32-byte oct (AES-256) key.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn oct(self, kid: &str, key: &[u8]) -> Self {
        self.push(kid, Kind::Oct, key, None)
    }

    /// Adds an X25519 recipient: its public half, and its private half to open (a writer that
    /// only seals holds none). Bind it with [`bind`](Self::bind).
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let full = Keyring::builder().oct("k1", &[7; 32]).primary("k1").generate_x25519("rec").bind("rec", ["api"]).build()?;
    /// let jwk = full.public_jwk("rec")?; // what a writer is given
    /// # let _ = jwk;
    /// let public = [9u8; 32]; // (the public half a writer received)
    /// let writer = Keyring::builder().x25519("rec", &public, None).bind("rec", ["api"]).primary("rec").build()?;
    /// assert!(writer.encrypt(b"1", "api").is_ok());
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn x25519(self, kid: &str, public: &[u8], private: Option<&[u8]>) -> Self {
        self.push(kid, Kind::X25519, public, private)
    }

    /// Adds an Ed25519 signer: its public half, and its private half (the 32-byte seed) to sign.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let verifier = Keyring::builder()
    ///     .oct("k1", &[7; 32])
    ///     .primary("k1")
    ///     .ed25519("sig", &[0x3b; 32], None) // (a signer's public half)
    ///     .bind("sig", ["api"])
    ///     .build()?;
    /// assert!(verifier.signing_kid("api").is_err()); // a public half cannot sign
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn ed25519(self, kid: &str, public: &[u8], private: Option<&[u8]>) -> Self {
        self.push(kid, Kind::Ed25519, public, private)
    }

    /// Adds a fresh oct key from the operating system's random source.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().generate_oct("k1").primary("k1").build()?;
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn generate_oct(self, kid: &str) -> Self {
        match jose::random::<32>() {
            Ok(key) => self.push(kid, Kind::Oct, &key[..], None),
            Err(e) => self.fail(e),
        }
    }

    /// Adds a fresh X25519 key pair.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().generate_x25519("rec").bind("rec", ["api"]).primary("rec").build()?;
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn generate_x25519(self, kid: &str) -> Self {
        match jose::random::<32>() {
            Ok(private) => {
                let public = jose::x25519_public(&private);
                self.push(kid, Kind::X25519, &public, Some(&private[..]))
            }
            Err(e) => self.fail(e),
        }
    }

    /// Adds a fresh Ed25519 key pair.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder()
    ///     .oct("k1", &[7; 32])
    ///     .primary("k1")
    ///     .generate_ed25519("sig")
    ///     .bind("sig", ["api"])
    ///     .signing_for("api", "sig")
    ///     .build()?;
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn generate_ed25519(self, kid: &str) -> Self {
        match jose::random::<32>() {
            Ok(seed) => {
                let public = jose::ed25519_public(&seed);
                self.push(kid, Kind::Ed25519, &public, Some(&seed[..]))
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(mut self, e: KeyringError) -> Self {
        self.failed.get_or_insert(e);
        self
    }

    /// Binds a key to the scopes it serves (replacing an earlier binding of the kid).
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).bind("k1", ["db"]).primary("k1").build()?;
    /// assert!(keyring.encrypt(b"1", "").is_err()); // a bound primary seals only its scopes
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn bind<S: Into<String>>(mut self, kid: &str, scopes: impl IntoIterator<Item = S>) -> Self {
        self.bindings.retain(|(k, _)| k != kid);
        self.bindings.push((kid.to_owned(), scopes.into_iter().map(Into::into).collect()));
        self
    }

    /// Removes a key, its binding and every designation naming it (the primary excepted:
    /// [`build`](Self::build) then refuses a primary that is gone).
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).oct("k0", &[6; 32]).primary("k1").build()?;
    /// let pruned = keyring.to_builder().remove("k0").build()?;
    /// assert_eq!(pruned.kids().collect::<Vec<_>>(), ["k1"]);
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn remove(mut self, kid: &str) -> Self {
        self.keys.retain(|k| k.kid != kid);
        self.bindings.retain(|(k, _)| k != kid);
        self.primaries.retain(|(_, k)| k != kid);
        self.signing.retain(|(_, k)| k != kid);
        self
    }

    /// Names the primary: the key that seals every scope without its own sealing key.
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).primary("k1").build()?;
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn primary(mut self, kid: &str) -> Self {
        self.primary = Primary::Kid(kid.to_owned());
        self
    }

    /// Names the key that seals `scope` (flechtctl's `flenc_primaries`).
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder().oct("k1", &[7; 32]).oct("k2", &[8; 32]).primary("k1").primary_for("db", "k2").build()?;
    /// assert_eq!(keyring.sealing_kid("db")?, "k2");
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn primary_for(mut self, scope: &str, kid: &str) -> Self {
        self.primaries.retain(|(s, _)| s != scope);
        self.primaries.push((scope.to_owned(), kid.to_owned()));
        self
    }

    /// Names the Ed25519 key that signs `scope` (flechtctl's `flenc_signing`).
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder()
    ///     .oct("k1", &[7; 32])
    ///     .primary("k1")
    ///     .generate_ed25519("sig")
    ///     .bind("sig", ["api"])
    ///     .signing_for("api", "sig")
    ///     .build()?;
    /// assert_eq!(keyring.signing_kid("api")?, "sig");
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn signing_for(mut self, scope: &str, kid: &str) -> Self {
        self.signing.retain(|(s, _)| s != scope);
        self.signing.push((scope.to_owned(), kid.to_owned()));
        self
    }

    /// Adds one JWK from its JSON text (what `flechtctl keyring import` reads: a public half
    /// someone exported, or a whole key), with its `flenc_scopes`; the same checks as one key of
    /// [`Keyring::from_json`].
    ///
    /// ```
    /// # use flechtwerk::secrets::Keyring;
    /// let keyring = Keyring::builder()
    ///     .jwk(r#"{"kty": "oct", "kid": "k1", "k": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#)?
    ///     .primary("k1")
    ///     .build()?;
    /// # Ok::<(), flechtwerk::secrets::KeyringError>(())
    /// ```
    pub fn jwk(mut self, text: &str) -> Result<Self, KeyringError> {
        let mut value = json::parse(text).map_err(|e| KeyringError::NotJson { detail: e.to_string() })?;
        let parsed = self.parse_jwk(&value);
        wipe(&mut value);
        parsed.map(|()| self)
    }

    /// One JWK of a document, checked in flechtctl's order: an object, `kty`, `kid`, a kid not
    /// seen before, `flenc_scopes`, then the key material.
    fn parse_jwk(&mut self, jwk: &Value) -> Result<(), KeyringError> {
        let Value::Object(jwk) = jwk else {
            return Err(KeyringError::JwkNotObject { got: py_type(Some(jwk)) });
        };
        let kty = match jwk.get("kty") {
            Some(Value::Str(kty)) if kty == "oct" || kty == "OKP" => kty.as_str(),
            other => return Err(KeyringError::UnsupportedKeyType { kty: repr_value(other) }),
        };
        let kid = match jwk.get("kid") {
            Some(Value::Str(kid)) if !kid.is_empty() => kid.clone(),
            other => return Err(KeyringError::BadKid { got: repr_value(other) }),
        };
        if self.keys.iter().any(|k| k.kid == kid) {
            return Err(KeyringError::DuplicateKid { kid });
        }
        if let Some(scopes) = jwk.get("flenc_scopes") {
            let scopes = match scopes {
                Value::List(items) if !items.is_empty() => items
                    .iter()
                    .map(|s| match s {
                        Value::Str(s) if !s.is_empty() => Some(s.clone()),
                        _ => None,
                    })
                    .collect::<Option<Vec<String>>>(),
                _ => None,
            };
            let scopes = scopes.ok_or_else(|| KeyringError::BadScopes { kid: kid.clone() })?;
            self.bindings.push((kid.clone(), scopes));
        }
        let key = if kty == "oct" {
            RawKey { kind: Kind::Oct, material: member(&kid, jwk, "k")?, private: None, kid }
        } else {
            let kind = match jwk.get("crv") {
                Some(Value::Str(crv)) if crv == "X25519" => Kind::X25519,
                Some(Value::Str(crv)) if crv == "Ed25519" => Kind::Ed25519,
                other => return Err(KeyringError::UnsupportedCurve { kid, crv: repr_value(other) }),
            };
            let material = member(&kid, jwk, "x")?;
            let private = if jwk.contains_key("d") { Some(member(&kid, jwk, "d")?) } else { None };
            RawKey { kid, kind, material, private }
        };
        self.keys.push(key);
        Ok(())
    }

    /// Checks everything and builds the keyring, in flechtctl's order: some key that seals;
    /// kids non-empty and unique; key lengths; the primary; the bindings; every public-key kid
    /// bound; the sealing keys per scope; the signing keys per scope.
    ///
    /// ```
    /// use flechtwerk::secrets::{Keyring, KeyringError};
    ///
    /// let err = Keyring::builder().oct("k1", &[7; 16]).primary("k1").build().unwrap_err();
    /// assert_eq!(err, KeyringError::OctKeyLength { kid: "k1".into(), len: 16 });
    /// ```
    pub fn build(self) -> Result<Keyring, KeyringError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let of = |kind: Kind| self.keys.iter().filter(move |k| k.kind == kind);
        if of(Kind::Oct).next().is_none() && of(Kind::X25519).next().is_none() {
            return Err(KeyringError::NoKeys);
        }
        let held: Vec<&RawKey> = of(Kind::Oct).chain(of(Kind::X25519)).chain(of(Kind::Ed25519)).collect();
        for key in &held {
            if key.kid.is_empty() {
                return Err(KeyringError::EmptyKid);
            }
            let same: Vec<&&RawKey> = held.iter().filter(|k| k.kid == key.kid).collect();
            if same.len() > 1 {
                return Err(if same.iter().all(|k| k.kind == key.kind) {
                    KeyringError::DuplicateKid { kid: key.kid.clone() }
                } else {
                    KeyringError::KidHeldTwice { kid: key.kid.clone() }
                });
            }
        }
        for key in of(Kind::Oct) {
            if key.material.len() != 32 {
                return Err(KeyringError::OctKeyLength { kid: key.kid.clone(), len: key.material.len() });
            }
        }
        for key in of(Kind::X25519).chain(of(Kind::Ed25519)) {
            let halves = [("public", Some(&key.material)), ("private", key.private.as_ref())];
            for (half, bytes) in halves {
                if let Some(bytes) = bytes.filter(|b| b.len() != 32) {
                    return Err(KeyringError::HalfLength {
                        kind: key.kind.name(),
                        kid: key.kid.clone(),
                        half,
                        len: bytes.len(),
                    });
                }
            }
        }
        let sealing = |kid: &str| held.iter().any(|k| k.kid == kid && k.kind != Kind::Ed25519);
        let primary = match &self.primary {
            Primary::Kid(kid) if sealing(kid) => kid.clone(),
            other => {
                let mut keys: Vec<String> = of(Kind::Oct).map(|k| k.kid.clone()).collect();
                keys.sort();
                let mut recipients: Vec<String> = of(Kind::X25519).map(|k| k.kid.clone()).collect();
                recipients.sort();
                keys.extend(recipients);
                let primary = match other {
                    Primary::Missing => return Err(KeyringError::NoPrimary),
                    Primary::Kid(kid) => repr(kid),
                    Primary::NotAString(r) => r.clone(),
                };
                return Err(KeyringError::PrimaryNotAKey { primary, keys });
            }
        };
        let mut bindings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (kid, scopes) in &self.bindings {
            if !held.iter().any(|k| &k.kid == kid) {
                return Err(KeyringError::BindingUnknownKid { kid: kid.clone() });
            }
            if scopes.is_empty() || scopes.iter().any(String::is_empty) {
                return Err(KeyringError::BadBinding { kid: kid.clone() });
            }
            bindings.insert(kid.clone(), scopes.iter().cloned().collect());
        }
        for key in of(Kind::X25519).chain(of(Kind::Ed25519)) {
            if !bindings.contains_key(&key.kid) {
                return Err(KeyringError::Unbound { kid: key.kid.clone() });
            }
        }
        for (scope, kid) in &self.primaries {
            if scope.is_empty() {
                return Err(KeyringError::PrimariesEmptyScope { kid: kid.clone() });
            }
            if !sealing(kid) {
                return Err(KeyringError::PrimariesNotSealing { scope: scope.clone(), kid: kid.clone() });
            }
            if bindings.get(kid).is_some_and(|b| !b.contains(scope)) {
                return Err(KeyringError::PrimariesNotBound { scope: scope.clone(), kid: kid.clone() });
            }
        }
        for (scope, kid) in &self.signing {
            if scope.is_empty() {
                return Err(KeyringError::SigningEmptyScope { kid: kid.clone() });
            }
            if !of(Kind::Ed25519).any(|k| &k.kid == kid && k.private.is_some()) {
                return Err(KeyringError::SigningNotPrivate { scope: scope.clone(), kid: kid.clone() });
            }
            if bindings.get(kid).is_some_and(|b| !b.contains(scope)) {
                return Err(KeyringError::SigningNotBound { scope: scope.clone(), kid: kid.clone() });
            }
        }
        let secret = |bytes: &[u8]| {
            let mut s = Secret::default();
            s.copy_from_slice(bytes);
            s
        };
        let public = |bytes: &[u8]| {
            let mut p = [0u8; 32];
            p.copy_from_slice(bytes);
            p
        };
        let entries = held
            .iter()
            .map(|k| {
                let material = match k.kind {
                    Kind::Oct => Material::Oct(secret(&k.material[..])),
                    Kind::X25519 => Material::X25519 {
                        public: public(&k.material[..]),
                        private: k.private.as_ref().map(|p| secret(&p[..])),
                    },
                    Kind::Ed25519 => Material::Ed25519 {
                        public: public(&k.material[..]),
                        private: k.private.as_ref().map(|p| secret(&p[..])),
                    },
                };
                let halves_match = match &material {
                    Material::Oct(_) => true,
                    Material::X25519 { public, private } => {
                        private.as_ref().is_none_or(|p| jose::x25519_public(p) == *public)
                    }
                    Material::Ed25519 { public, private } => {
                        private.as_ref().is_none_or(|p| jose::ed25519_public(p) == *public)
                    }
                };
                (k.kid.clone(), Entry { material, bound: bindings.get(&k.kid).cloned(), halves_match })
            })
            .collect();
        Ok(Keyring {
            entries,
            primary,
            primaries: self.primaries.iter().cloned().collect(),
            signing: self.signing.iter().cloned().collect(),
        })
    }
}

/// Overwrites every string of a parsed document (its key members among them) before it is dropped.
fn wipe(value: &mut Value) {
    match value {
        Value::Str(s) => s.zeroize(),
        Value::List(items) => items.iter_mut().for_each(wipe),
        Value::Object(map) => map.values_mut().for_each(wipe),
        _ => {}
    }
}

/// Decodes key material member `name` of JWK `kid`.
fn member(kid: &str, jwk: &Map, name: &'static str) -> Result<Zeroizing<Vec<u8>>, KeyringError> {
    match jwk.get(name) {
        None => Err(KeyringError::MissingMaterial { kid: kid.to_owned(), member: name }),
        Some(Value::Str(raw)) => decode_key_material(raw)
            .map(Zeroizing::new)
            .map_err(|detail| KeyringError::MalformedMaterial { kid: kid.to_owned(), member: name, detail }),
        Some(other) => Err(KeyringError::MalformedMaterial {
            kid: kid.to_owned(),
            member: name,
            detail: format!("'{name}' must be a base64url string, got {}", py_type(Some(other))),
        }),
    }
}

/// Whether `text` is a password-protected keyring: five `.`-separated segments (surrounding
/// whitespace ignored) whose first decodes to a JSON object with `cty` `jwk-set+json`. Never
/// fails: anything else is `false`.
///
/// ```
/// use flechtwerk::secrets::is_protected_keyring;
///
/// assert!(!is_protected_keyring(r#"{"keys": [], "primary": "a"}"#));
/// assert!(is_protected_keyring("eyJjdHkiOiJqd2stc2V0K2pzb24ifQ...."));
/// ```
pub fn is_protected_keyring(text: &str) -> bool {
    let segments: Vec<&str> = text.trim().split('.').collect();
    if segments.len() != 5 {
        return false;
    }
    let Ok(bytes) = decode_key_material(segments[0]) else { return false };
    let Ok(text) = std::str::from_utf8(&bytes) else { return false };
    matches!(json::parse(text), Ok(Value::Object(header)) if header.get("cty") == Some(&Value::Str(jose::KEYRING_CTY.to_owned())))
}
