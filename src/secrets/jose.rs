//! The JOSE framing, ours: compact serializations split and joined, the protected headers read
//! and checked as joserfc 1.8 checks them under flechtctl's registries (allowed members and their
//! types, `crit`, the algorithm allowlists, the size caps), and written in the exact form Python
//! writes. Every cryptographic operation below the framing is a RustCrypto / dalek call.

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::Aes256Gcm;
use ed25519_dalek::{Signer as _, Verifier as _};
use sha2::{Sha256, Sha512};
use zeroize::Zeroizing;

use super::error::{KeyringError, Refusal, SecretError};
use super::text::{b64url, decode_lenient, push_json_str, repr_value, STRICT};
use crate::json::{self, Map, Value};
use base64::Engine as _;

/// 32 secret bytes, wiped when dropped.
pub(crate) type Secret = Zeroizing<[u8; 32]>;

pub(crate) const DIR: &str = "dir";
pub(crate) const ECDH_ES_A256KW: &str = "ECDH-ES+A256KW";
pub(crate) const PBES2: &str = "PBES2-HS512+A256KW";
pub(crate) const A256GCM: &str = "A256GCM";
pub(crate) const ED25519: &str = "Ed25519";
pub(crate) const SCOPE_MEMBER: &str = "flenc_scope";
/// The content type that marks a password-protected keyring.
pub(crate) const KEYRING_CTY: &str = "jwk-set+json";
/// PBKDF2 iterations written (flechtctl's figure) and the most accepted on reading (joserfc's).
pub(crate) const KEYRING_ITERATIONS: u32 = 210_000;
pub(crate) const KEYRING_ITERATIONS_MAX: i64 = 300_000;
/// The shortest keyring password, in UTF-8 bytes.
pub(crate) const PASSWORD_MIN_BYTES: usize = 14;

/// joserfc's JWE caps (base64url characters): header, encrypted key, IV, ciphertext, tag.
pub(crate) const JWE_HEADER_MAX: usize = 1024;
const JWE_ENCRYPTED_KEY_MAX: usize = 1024;
const JWE_IV_MAX: usize = 64;
pub(crate) const JWE_CIPHERTEXT_MAX: usize = 65536;
const JWE_TAG_MAX: usize = 64;
/// joserfc's JWS caps (base64url characters): header, payload, signature.
pub(crate) const JWS_HEADER_MAX: usize = 512;
pub(crate) const JWS_PAYLOAD_MAX: usize = 128_000;
const JWS_SIGNATURE_MAX: usize = 1024;

/// Members of joserfc's JWS header registry (RFC 7515 §4.1, with RFC 7797's `b64`).
const JWS_MEMBERS: [&str; 12] =
    ["alg", "jku", "jwk", "kid", "x5u", "x5c", "x5t", "x5t#S256", "typ", "cty", "crit", "b64"];

/// Which JWE a caller expects: the key's kind picks it, never the token.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Profile {
    /// `dir` + `A256GCM` under an oct key.
    Dir,
    /// `ECDH-ES+A256KW` + `A256GCM` to an X25519 recipient.
    EcdhEs,
    /// `PBES2-HS512+A256KW` + `A256GCM`: a password-protected keyring.
    Pbes2,
}

impl Profile {
    fn alg(self) -> &'static str {
        match self {
            Profile::Dir => DIR,
            Profile::EcdhEs => ECDH_ES_A256KW,
            Profile::Pbes2 => PBES2,
        }
    }

    fn allows(self, member: &str) -> bool {
        JWS_MEMBERS.contains(&member)
            || matches!(member, "enc" | "zip")
            || match self {
                Profile::Dir => member == SCOPE_MEMBER,
                Profile::EcdhEs => matches!(member, "flenc_scope" | "epk" | "apu" | "apv"),
                Profile::Pbes2 => matches!(member, "p2s" | "p2c"),
            }
    }
}

/// A compact JWE, split and checked, not yet decrypted.
pub(crate) struct Jwe<'a> {
    header_segment: &'a str,
    pub(crate) header: Map,
    encrypted_key: Vec<u8>,
    iv: Vec<u8>,
    ciphertext: Vec<u8>,
    tag: Vec<u8>,
}

fn strict(segment: &str, part: &'static str) -> Result<Vec<u8>, Refusal> {
    STRICT.decode(segment).map_err(|_| Refusal::Base64 { part })
}

fn cap(segment: &str, part: &'static str, limit: usize) -> Result<(), Refusal> {
    if segment.len() > limit {
        return Err(Refusal::TooLarge { part, limit });
    }
    Ok(())
}

/// A header segment, decoded strictly, as a JSON object.
fn header_object(segment: &str) -> Result<Map, Refusal> {
    let bytes = strict(segment, "protected header")?;
    let text = std::str::from_utf8(&bytes).map_err(|_| Refusal::Header)?;
    match json::parse(text) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(Refusal::Header),
    }
}

fn is_str_list(v: &Value) -> bool {
    matches!(v, Value::List(items) if items.iter().all(|i| matches!(i, Value::Str(_))))
}

/// The header registry check: members outside the registry, member types, `crit`.
fn check_members(header: &Map, allows: impl Fn(&str) -> bool) -> Result<(), Refusal> {
    for (name, value) in header {
        if !allows(name) {
            return Err(Refusal::UnsupportedMember { member: name.clone() });
        }
        let ok = match name.as_str() {
            "jku" | "x5u" => matches!(value, Value::Str(s) if s.starts_with("http://") || s.starts_with("https://")),
            "jwk" | "epk" => matches!(value, Value::Object(_)),
            "x5c" | "crit" => is_str_list(value),
            "b64" => matches!(value, Value::Bool(_)),
            "p2c" => matches!(value, Value::Int(n) if (1..=KEYRING_ITERATIONS_MAX).contains(n)),
            _ => matches!(value, Value::Str(_)),
        };
        if !ok {
            return Err(Refusal::MemberValue { member: name.clone() });
        }
    }
    if let Some(Value::List(crit)) = header.get("crit") {
        for name in crit.iter().filter_map(|v| if let Value::Str(s) = v { Some(s) } else { None }) {
            if !header.contains_key(name) {
                return Err(Refusal::MemberValue { member: "crit".to_owned() });
            }
            if !allows(name) {
                return Err(Refusal::UnsupportedMember { member: name.clone() });
            }
        }
    }
    Ok(())
}

fn str_member<'m>(header: &'m Map, name: &str) -> Option<&'m str> {
    match header.get(name) {
        Some(Value::Str(s)) => Some(s),
        _ => None,
    }
}

/// Splits and checks a compact JWE for `profile`: caps, five segments, strict base64url, the
/// header registry, the algorithm allowlist.
pub(crate) fn parse_jwe(compact: &str, profile: Profile) -> Result<Jwe<'_>, Refusal> {
    cap(compact, "token", JWE_HEADER_MAX + JWE_ENCRYPTED_KEY_MAX + JWE_IV_MAX + JWE_CIPHERTEXT_MAX + JWE_TAG_MAX)?;
    let parts: Vec<&str> = compact.split('.').collect();
    let [header_segment, ek, iv, ciphertext, tag] = parts[..] else {
        return Err(Refusal::Segments { expected: 5 });
    };
    cap(header_segment, "protected header", JWE_HEADER_MAX)?;
    cap(ek, "encrypted key", JWE_ENCRYPTED_KEY_MAX)?;
    cap(iv, "initialization vector", JWE_IV_MAX)?;
    cap(ciphertext, "ciphertext", JWE_CIPHERTEXT_MAX)?;
    cap(tag, "authentication tag", JWE_TAG_MAX)?;
    let header = header_object(header_segment)?;
    if !header.contains_key("alg") || !header.contains_key("enc") {
        return Err(Refusal::Header);
    }
    let jwe = Jwe {
        header_segment,
        encrypted_key: strict(ek, "encrypted key")?,
        iv: strict(iv, "initialization vector")?,
        ciphertext: strict(ciphertext, "ciphertext")?,
        tag: strict(tag, "authentication tag")?,
        header,
    };
    check_members(&jwe.header, |m| profile.allows(m))?;
    for (member, allowed) in [("alg", profile.alg()), ("enc", A256GCM)] {
        let name = str_member(&jwe.header, member).unwrap_or_default();
        if name != allowed {
            return Err(Refusal::Algorithm { name: name.to_owned() });
        }
    }
    if let Some(zip) = jwe.header.get("zip") {
        return Err(Refusal::Algorithm {
            name: str_member(&jwe.header, "zip").map_or_else(|| repr_value(Some(zip)), str::to_owned),
        });
    }
    Ok(jwe)
}

impl Jwe<'_> {
    /// The content: AES-256-GCM under `cek`, the header segment as associated data.
    fn open_content(&self, cek: &[u8; 32]) -> Result<Zeroizing<Vec<u8>>, Refusal> {
        let iv: [u8; 12] = self.iv[..].try_into().map_err(|_| Refusal::Length { part: "initialization vector" })?;
        let tag: [u8; 16] = self.tag[..].try_into().map_err(|_| Refusal::Length { part: "authentication tag" })?;
        let cipher = Aes256Gcm::new(&(*cek).into());
        let mut buffer = Zeroizing::new(self.ciphertext.clone());
        cipher
            .decrypt_in_place_detached(&iv.into(), self.header_segment.as_bytes(), &mut buffer, &tag.into())
            .map_err(|_| Refusal::Authentication)?;
        Ok(buffer)
    }

    /// `dir`: the oct key is the content key; the encrypted key must be empty.
    pub(crate) fn open_dir(&self, key: &[u8; 32]) -> Result<Zeroizing<Vec<u8>>, Refusal> {
        if !self.encrypted_key.is_empty() {
            return Err(Refusal::Length { part: "encrypted key" });
        }
        self.open_content(key)
    }

    /// `ECDH-ES+A256KW`: X25519 with the header's ephemeral key, Concat KDF, AES key unwrap.
    pub(crate) fn open_ecdh(&self, private: &[u8; 32]) -> Result<Zeroizing<Vec<u8>>, Refusal> {
        let epk = match self.header.get("epk") {
            Some(Value::Object(epk)) => epk,
            _ => return Err(Refusal::MemberValue { member: "epk".to_owned() }),
        };
        let bad_epk = || Refusal::MemberValue { member: "epk".to_owned() };
        if str_member(epk, "kty") != Some("OKP") || str_member(epk, "crv") != Some("X25519") {
            return Err(bad_epk());
        }
        let x = STRICT.decode(str_member(epk, "x").ok_or_else(bad_epk)?).map_err(|_| bad_epk())?;
        let ephemeral: [u8; 32] = x.try_into().map_err(|_| bad_epk())?;
        let secret = x25519_dalek::StaticSecret::from(*private);
        let shared = secret.diffie_hellman(&x25519_dalek::PublicKey::from(ephemeral));
        if !shared.was_contributory() {
            return Err(Refusal::LowOrder);
        }
        let party = |name: &'static str| -> Result<Vec<u8>, Refusal> {
            match str_member(&self.header, name) {
                Some(s) if !s.is_empty() => strict(s, name),
                _ => Ok(Vec::new()),
            }
        };
        let kek = concat_kdf(shared.as_bytes(), &party("apu")?, &party("apv")?);
        let cek = unwrap_key(&kek, &self.encrypted_key)?;
        self.open_content(&cek)
    }

    /// `PBES2-HS512+A256KW`: PBKDF2-HMAC-SHA512 of the password, AES key unwrap.
    pub(crate) fn open_pbes2(&self, password: &[u8]) -> Result<Zeroizing<Vec<u8>>, Refusal> {
        let salt = match str_member(&self.header, "p2s") {
            Some(s) => strict(s, "p2s")?,
            None => return Err(Refusal::MemberValue { member: "p2s".to_owned() }),
        };
        let iterations = match self.header.get("p2c") {
            Some(Value::Int(n)) => u32::try_from(*n).map_err(|_| Refusal::MemberValue { member: "p2c".to_owned() })?,
            _ => return Err(Refusal::MemberValue { member: "p2c".to_owned() }),
        };
        if iterations < 1000 {
            tracing::warn!(iterations, "opening a password-protected keyring with fewer than 1000 PBKDF2 iterations");
        }
        let kek = pbes2_kek(password, &salt, iterations);
        let cek = unwrap_key(&kek, &self.encrypted_key)?;
        self.open_content(&cek)
    }
}

fn unwrap_key(kek: &[u8; 32], wrapped: &[u8]) -> Result<Secret, Refusal> {
    if wrapped.len() != 40 {
        return Err(Refusal::Length { part: "encrypted key" });
    }
    let mut cek = Secret::default();
    aes_kw::KekAes256::new(&(*kek).into()).unwrap(wrapped, &mut cek[..]).map_err(|_| Refusal::Unwrap)?;
    Ok(cek)
}

fn wrap_key(kek: &[u8; 32], cek: &[u8; 32]) -> [u8; 40] {
    let mut wrapped = [0u8; 40];
    // AES-KW of 32 bytes into 40 cannot fail: the lengths are the algorithm's.
    let _ = aes_kw::KekAes256::new(&(*kek).into()).wrap(cek, &mut wrapped);
    wrapped
}

/// RFC 7518 §4.6.2: Concat KDF (SHA-256) of the shared secret, 256 bits for A256KW, with
/// AlgorithmID `ECDH-ES+A256KW`, PartyUInfo/PartyVInfo from `apu`/`apv`, SuppPubInfo 256.
fn concat_kdf(shared: &[u8; 32], apu: &[u8], apv: &[u8]) -> Secret {
    let mut other_info = Vec::with_capacity(64);
    for part in [ECDH_ES_A256KW.as_bytes(), apu, apv] {
        other_info.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
        other_info.extend_from_slice(part);
    }
    other_info.extend_from_slice(&256u32.to_be_bytes());
    let mut kek = Secret::default();
    // 32 bytes of one SHA-256 round: within the KDF's bounds, so it cannot fail.
    let _ = concat_kdf::derive_key_into::<Sha256>(shared, &other_info, &mut kek[..]);
    kek
}

fn pbes2_kek(password: &[u8], salt: &[u8], iterations: u32) -> Secret {
    let mut full_salt = Vec::with_capacity(PBES2.len() + 1 + salt.len());
    full_salt.extend_from_slice(PBES2.as_bytes());
    full_salt.push(0);
    full_salt.extend_from_slice(salt);
    let mut kek = Secret::default();
    pbkdf2::pbkdf2_hmac::<Sha512>(password, &full_salt, iterations, &mut kek[..]);
    kek
}

/// `n` bytes from the operating system's random source.
pub(crate) fn random<const N: usize>() -> Result<Zeroizing<[u8; N]>, KeyringError> {
    let mut bytes = Zeroizing::new([0u8; N]);
    getrandom::getrandom(&mut bytes[..]).map_err(|_| KeyringError::NoRandomness)?;
    Ok(bytes)
}

/// Base64url length of `n` bytes, unpadded.
pub(crate) fn b64_len(n: usize) -> usize {
    n / 3 * 4 + [0, 2, 3][n % 3]
}

/// The protected header's head, as Python writes it: `{"alg":…,"enc":"A256GCM","kid":…` then
/// `"flenc_scope"` when scoped (the caller closes the object).
pub(crate) fn jwe_header_head(alg: &str, kid: &str, scope: &str) -> String {
    let mut header = String::with_capacity(64 + kid.len() + scope.len());
    header.push_str("{\"alg\":");
    push_json_str(&mut header, alg);
    header.push_str(",\"enc\":\"A256GCM\",\"kid\":");
    push_json_str(&mut header, kid);
    if !scope.is_empty() {
        header.push_str(",\"flenc_scope\":");
        push_json_str(&mut header, scope);
    }
    header
}

/// Seals `payload` under `cek`: a fresh 96-bit IV, AES-256-GCM with the header segment as
/// associated data. `header` is the complete JSON text; caps are the caller's.
pub(crate) fn seal(header: &str, cek: &[u8; 32], encrypted_key: &[u8], payload: &[u8]) -> Result<String, SecretError> {
    let header_segment = b64url(header.as_bytes());
    let iv = random::<12>()?;
    let cipher = Aes256Gcm::new(&(*cek).into());
    let mut buffer = Zeroizing::new(payload.to_vec());
    let tag =
        cipher.encrypt_in_place_detached(&(*iv).into(), header_segment.as_bytes(), &mut buffer).map_err(|_| {
            SecretError::TooLarge { part: "ciphertext", size: b64_len(payload.len()), limit: JWE_CIPHERTEXT_MAX }
        })?;
    Ok(format!("{header_segment}.{}.{}.{}.{}", b64url(encrypted_key), b64url(&iv[..]), b64url(&buffer), b64url(&tag)))
}

/// Refuses before writing what a reader would refuse for its size.
pub(crate) fn check_jwe_sizes(header: &str, payload_len: usize) -> Result<(), SecretError> {
    let header_len = b64_len(header.len());
    if header_len > JWE_HEADER_MAX {
        return Err(SecretError::TooLarge { part: "header", size: header_len, limit: JWE_HEADER_MAX });
    }
    let ciphertext_len = b64_len(payload_len);
    if ciphertext_len > JWE_CIPHERTEXT_MAX {
        return Err(SecretError::TooLarge { part: "ciphertext", size: ciphertext_len, limit: JWE_CIPHERTEXT_MAX });
    }
    Ok(())
}

/// Seals to an X25519 recipient: a fresh ephemeral key pair, Concat KDF, a fresh content key
/// wrapped with AES-KW. `head` is [`jwe_header_head`]'s output; `epk` is appended last.
pub(crate) fn seal_ecdh(head: String, kid: &str, recipient: &[u8; 32], payload: &[u8]) -> Result<String, SecretError> {
    let ephemeral = x25519_dalek::StaticSecret::from(*random::<32>()?);
    let ephemeral_public = x25519_dalek::PublicKey::from(&ephemeral);
    let shared = ephemeral.diffie_hellman(&x25519_dalek::PublicKey::from(*recipient));
    if !shared.was_contributory() {
        return Err(KeyringError::LowOrderRecipient { kid: kid.to_owned() }.into());
    }
    let kek = concat_kdf(shared.as_bytes(), &[], &[]);
    let cek = random::<32>()?;
    let wrapped = wrap_key(&kek, &cek);
    let mut header = head;
    header.push_str(",\"epk\":{\"crv\":\"X25519\",\"x\":\"");
    header.push_str(&b64url(ephemeral_public.as_bytes()));
    header.push_str("\",\"kty\":\"OKP\"}}");
    check_jwe_sizes(&header, payload.len())?;
    seal(&header, &cek, &wrapped, payload)
}

/// Seals a keyring document under a password: PBES2-HS512+A256KW, 210,000 iterations, a fresh
/// 16-byte salt, `cty` `jwk-set+json` (flechtctl's header, member for member).
pub(crate) fn seal_pbes2(password: &[u8], payload: &[u8]) -> Result<String, SecretError> {
    let salt = random::<16>()?;
    let header = format!(
        "{{\"alg\":\"{PBES2}\",\"cty\":\"{KEYRING_CTY}\",\"enc\":\"{A256GCM}\",\"p2c\":{KEYRING_ITERATIONS},\"p2s\":\"{}\"}}",
        b64url(&salt[..])
    );
    let kek = pbes2_kek(password, &salt[..], KEYRING_ITERATIONS);
    let cek = random::<32>()?;
    seal(&header, &cek, &wrap_key(&kek, &cek), payload)
}

/// The X25519 public half of a private key.
pub(crate) fn x25519_public(private: &[u8; 32]) -> [u8; 32] {
    let secret = x25519_dalek::StaticSecret::from(*private);
    *x25519_dalek::PublicKey::from(&secret).as_bytes()
}

/// The Ed25519 public half of a seed.
pub(crate) fn ed25519_public(seed: &[u8; 32]) -> [u8; 32] {
    ed25519_dalek::SigningKey::from_bytes(seed).verifying_key().to_bytes()
}

/// A compact JWS, split and checked, not yet verified.
pub(crate) struct Jws<'a> {
    signing_input: &'a str,
    pub(crate) header: Map,
    pub(crate) payload: Vec<u8>,
    signature: [u8; 64],
}

/// Splits and checks a compact JWS: caps, three segments, the registry, `Ed25519` only,
/// base64url-encoded payloads only.
pub(crate) fn parse_jws(compact: &str) -> Result<Jws<'_>, Refusal> {
    cap(compact, "token", JWS_HEADER_MAX + JWS_PAYLOAD_MAX + JWS_SIGNATURE_MAX)?;
    let parts: Vec<&str> = compact.split('.').collect();
    let [header_segment, payload, signature] = parts[..] else {
        return Err(Refusal::Segments { expected: 3 });
    };
    cap(header_segment, "protected header", JWS_HEADER_MAX)?;
    cap(signature, "signature", JWS_SIGNATURE_MAX)?;
    cap(payload, "payload", JWS_PAYLOAD_MAX)?;
    let header = header_object(header_segment)?;
    if !header.contains_key("alg") {
        return Err(Refusal::Header);
    }
    check_members(&header, |m| JWS_MEMBERS.contains(&m) || m == SCOPE_MEMBER)?;
    let alg = str_member(&header, "alg").unwrap_or_default();
    if alg != ED25519 {
        return Err(Refusal::Algorithm { name: alg.to_owned() });
    }
    if header.get("b64") == Some(&Value::Bool(false)) {
        return Err(Refusal::UnencodedPayload);
    }
    let payload_bytes = strict(payload, "payload")?;
    let signature: [u8; 64] =
        strict(signature, "signature")?.try_into().map_err(|_| Refusal::Length { part: "signature" })?;
    let signing_input = &compact[..header_segment.len() + 1 + payload.len()];
    Ok(Jws { signing_input, header, payload: payload_bytes, signature })
}

impl Jws<'_> {
    /// Ed25519 (RFC 8032) under `public`: cofactorless, as OpenSSL (Python's backend) verifies.
    pub(crate) fn verify(&self, public: &[u8; 32]) -> Result<(), Refusal> {
        let key = ed25519_dalek::VerifyingKey::from_bytes(public).map_err(|_| Refusal::Authentication)?;
        key.verify(self.signing_input.as_bytes(), &ed25519_dalek::Signature::from_bytes(&self.signature))
            .map_err(|_| Refusal::Authentication)
    }
}

/// Signs: `{"alg":"Ed25519","flenc_scope":…,"kid":…}`, the payload base64url-encoded.
pub(crate) fn sign(seed: &[u8; 32], kid: &str, scope: &str, payload: &[u8]) -> Result<String, SecretError> {
    let mut header = String::with_capacity(64 + kid.len() + scope.len());
    header.push_str("{\"alg\":\"Ed25519\",\"flenc_scope\":");
    push_json_str(&mut header, scope);
    header.push_str(",\"kid\":");
    push_json_str(&mut header, kid);
    header.push('}');
    let header_len = b64_len(header.len());
    if header_len > JWS_HEADER_MAX {
        return Err(SecretError::TooLarge { part: "header", size: header_len, limit: JWS_HEADER_MAX });
    }
    let payload_len = b64_len(payload.len());
    if payload_len > JWS_PAYLOAD_MAX {
        return Err(SecretError::TooLarge { part: "payload", size: payload_len, limit: JWS_PAYLOAD_MAX });
    }
    let signing_input = format!("{}.{}", b64url(header.as_bytes()), b64url(payload));
    let key = ed25519_dalek::SigningKey::from_bytes(seed);
    let signature = key.sign(signing_input.as_bytes());
    Ok(format!("{signing_input}.{}", b64url(&signature.to_bytes())))
}

/// The protected header of a compact JWE or JWS read without a key, as flechtctl peeks at it:
/// lenient base64url, then JSON, which must be an object.
pub(crate) fn peek_header(compact: &str) -> Result<Map, SecretError> {
    let segment = compact.split('.').next().unwrap_or_default();
    let bytes = decode_lenient(segment).map_err(|detail| SecretError::MalformedHeader { detail })?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| SecretError::MalformedHeader { detail: "the header is not UTF-8".to_owned() })?;
    match json::parse(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(SecretError::MalformedHeader {
            detail: format!("expected a JSON object, got {}", super::text::py_type(Some(&other))),
        }),
        Err(e) => Err(SecretError::MalformedHeader { detail: e.to_string() }),
    }
}

/// The `kid` of a compact JWE or JWS, read without a key.
pub(crate) fn peek_kid(compact: &str) -> Result<String, SecretError> {
    let header = peek_header(compact)?;
    match header.get("kid") {
        Some(Value::Str(kid)) if !kid.is_empty() => Ok(kid.clone()),
        other => Err(SecretError::NoUsableKid { found: repr_value(other) }),
    }
}

/// The compact serialization after `scheme:envelope:`: the scheme must be `scheme` (flechtctl
/// does not check it; docs/secrets-format.md §15), the envelope runs to the next `:` and must be
/// `expected`, and the rest must not be empty.
pub(crate) fn strip_envelope<'t>(
    token: &'t str,
    scheme: &'static str,
    expected: &'static str,
) -> Result<&'t str, SecretError> {
    // Python drops the scheme unread; a token under another scheme (one flipped byte of a
    // valid token) would then open. Ours is refused: the same class, its own message.
    if token.strip_prefix(scheme).and_then(|rest| rest.strip_prefix(':')).is_none() {
        return Err(SecretError::NotAToken { expected: scheme });
    }
    let body = token.char_indices().nth(scheme.len() + 1).map_or("", |(at, _)| &token[at..]);
    match body.split_once(':') {
        Some((envelope, compact)) if envelope == expected && !compact.is_empty() => Ok(compact),
        Some((envelope, _)) => Err(SecretError::UnknownEnvelope { scheme, envelope: envelope.to_owned(), expected }),
        None => Err(SecretError::UnknownEnvelope { scheme, envelope: body.to_owned(), expected }),
    }
}
