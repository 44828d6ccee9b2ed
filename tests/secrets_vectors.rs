//! Field-level secrets against Python's flechtctl / flechtwerk[secrets] 0.17.0: every section of
//! tests/golden/secrets_vectors.json that concerns keyrings and tokens (docs/secrets-format.md
//! §13), walked case by case. Python's tokens open and verify here with the expected payloads,
//! every refusal is refused with the same class of error (and, where the text is ours to match,
//! the same message), and what Rust writes — keyring files, token headers, Ed25519 signatures —
//! equals Python's bytes where the vectors pin them. Each test prints how many vectors it checked.

use std::sync::OnceLock;

use std::sync::Arc;

use flechtwerk::attribute::{dict, encrypted, list, signed, Codec, CodecError, ANY, INT, STR};
use flechtwerk::json::{self, Map, Value};
use flechtwerk::secrets::{
    is_encrypted, is_protected_keyring, is_signed, kid_of, read_header, signer_of, Keyring, KeyringError, SecretError,
};
use flechtwerk::testing::{with_secret_observer, Observed, RecordingObserver};

fn vectors() -> &'static Map {
    static VECTORS: OnceLock<Map> = OnceLock::new();
    VECTORS.get_or_init(|| {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/secrets_vectors.json"))
            .expect("the vector file");
        match json::parse(&text).expect("the vector file is JSON") {
            Value::Object(map) => map,
            _ => panic!("the vector file is an object"),
        }
    })
}

fn section(name: &str) -> &'static [Value] {
    match &vectors()[name] {
        Value::List(items) => items,
        _ => panic!("{name} is a list"),
    }
}

fn obj(v: &Value) -> &Map {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other:?}"),
    }
}

fn s<'a>(m: &'a Map, key: &str) -> &'a str {
    match m.get(key) {
        Some(Value::Str(s)) => s,
        other => panic!("{key} is not a string: {other:?}"),
    }
}

fn keyring(name: &str) -> Keyring {
    let keyrings = obj(&vectors()["keyrings"]);
    Keyring::from_json(s(obj(&keyrings[name]), "json")).unwrap_or_else(|e| panic!("keyring {name}: {e}"))
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
}

/// Python's class for one of our keyring errors.
fn keyring_class(e: &KeyringError) -> &'static str {
    match e {
        KeyringError::UnknownKey { .. } => "UnknownKeyError",
        KeyringError::NotInstalled => "KeyringNotInstalledError",
        KeyringError::Conflict => "KeyringConflictError",
        _ => "KeyringError",
    }
}

/// Python's class for one of our token errors.
fn secret_class(e: &SecretError) -> &'static str {
    match e {
        SecretError::Keyring(e) => keyring_class(e),
        SecretError::UnknownEnvelope { .. }
        | SecretError::MalformedHeader { .. }
        | SecretError::NoUsableKid { .. }
        | SecretError::NotAToken { .. } => "SecretFormatError",
        SecretError::Decrypt { .. } => "SecretDecryptError",
        SecretError::Signature { .. } => "SecretSignatureError",
        SecretError::ScopeRequired { .. } => "ValueError",
        SecretError::Plaintext { .. } => "PlaintextSecretError",
        SecretError::Unsigned { .. } => "UnsignedSecretError",
        _ => "other",
    }
}

/// Whether Python's message for a refusal is one we reproduce word for word: every message but
/// those quoting Python's JSON parser, and those of the two deliberate deviations (a value
/// under another scheme: "not a flenc token"; a protected document given to `from_json`).
fn message_is_ours_to_match(python_message: &str) -> bool {
    !(python_message.starts_with("malformed JWE header: ")
        || python_message.contains("not valid JSON")
        || python_message.starts_with("unknown flenc envelope ''")
        || python_message.starts_with("unknown flsig envelope 'jwe'")
        || python_message.starts_with("keyring document is password-protected")
        // Python names its own API (`Flechtwerk.of(keyring=...)`), we name ours.
        || python_message.starts_with("no keyring installed"))
}

/// An expected outcome: `Ok(value)` or `Err((class, message))`.
fn expected(outcome: &Value) -> Result<&Map, (&str, &str)> {
    let outcome = obj(outcome);
    if outcome["ok"] == Value::Bool(true) {
        Ok(outcome)
    } else {
        let error = obj(&outcome["error"]);
        Err((s(error, "type"), s(error, "message")))
    }
}

fn check_error(context: &str, python: (&str, &str), class: &str, message: &str) {
    assert_eq!(class, python.0, "{context}: class (ours: {message})");
    if message_is_ours_to_match(python.1) {
        assert_eq!(message, python.1, "{context}: message");
    }
}

/// The canonical JSON text of a value (what Python sealed or signed).
fn canonical(v: &Value) -> Vec<u8> {
    json::to_canonical_bytes(v).expect("canonical")
}

/// A protected header without the ephemeral key's `x` (fresh in every token).
fn header_without_epk_x(mut header: Map) -> Map {
    if let Some(Value::Object(epk)) = header.get_mut("epk") {
        epk.remove("x");
    }
    header
}

fn header_segment(token: &str) -> &str {
    token.splitn(3, ':').nth(2).unwrap().split('.').next().unwrap()
}

/// SEC-01, SEC-02: every named keyring of the vectors loads, writes back Python's exact file,
/// and names its kids (sorted, across kinds) and primary as Python does.
#[test]
fn sec_01_02_keyrings_load_and_write_pythons_bytes() {
    let keyrings = obj(&vectors()["keyrings"]);
    for (name, entry) in keyrings {
        let entry = obj(entry);
        let text = s(entry, "json");
        let keyring = Keyring::from_json(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(keyring.to_json().as_str(), text, "{name}: to_json");
        assert_eq!(Keyring::from_json(&keyring.to_json()).unwrap(), keyring, "{name}: round trip");
        let kids: Vec<Value> = keyring.kids().map(Value::from).collect();
        assert_eq!(Value::List(kids), entry["kids"], "{name}: kids");
        assert_eq!(keyring.primary(), s(entry, "primary"), "{name}: primary");
        // The same keyring rebuilt through its builder is the same value.
        assert_eq!(keyring.to_builder().build().unwrap(), keyring, "{name}: to_builder");
    }
    println!("keyrings: {} of {} load and write Python's bytes", keyrings.len(), keyrings.len());
}

/// SEC-10, SEC-11, SEC-12, SEC-41 (the error texts): every token Python's `encrypt` minted (both algorithms, scoped and
/// not, nine payload kinds) read under every reader scope and keyring of the vectors: the
/// payload where Python read it, the same refusal where Python refused. And our own token of the
/// same value, keyring and scope carries Python's header (byte for byte for `dir`, member for
/// member with a fresh ephemeral key for ECDH-ES) and reads back under every reader scope with
/// Python's outcome.
#[test]
fn sec_10_11_12_python_tokens_decrypt_and_ours_match_them() {
    let (mut tokens, mut reads, mut ours) = (0, 0, 0);
    for case in section("encrypt") {
        let case = obj(case);
        let token = s(case, "token");
        let scope = s(case, "scope");
        let payload = s(case, "payload").as_bytes();
        let header = obj(&case["header"]).clone();
        assert!(is_encrypted(token));
        assert_eq!(kid_of(token).unwrap(), s(case, "kid"));
        assert_eq!(read_header(token).unwrap(), header);
        let writer = keyring(s(case, "keyring"));
        let mine = writer.encrypt(payload, scope).unwrap();
        let my_header = read_header(&mine).unwrap();
        if header["alg"] == Value::from("dir") {
            assert_eq!(header_segment(&mine), header_segment(token), "dir header bytes");
        } else {
            assert_eq!(header_without_epk_x(my_header.clone()), header_without_epk_x(header.clone()));
            let epk = obj(&my_header["epk"]);
            let serialized = String::from_utf8(flechtwerk_b64(header_segment(&mine))).unwrap();
            assert!(serialized
                .ends_with(&format!(",\"epk\":{{\"crv\":\"X25519\",\"x\":\"{}\",\"kty\":\"OKP\"}}}}", s(epk, "x"))));
        }
        tokens += 1;
        for (reader, by_scope) in obj(&case["decrypt"]) {
            let reader_keyring = keyring(reader);
            for (reader_scope, outcome) in obj(by_scope) {
                let context = format!("{token} read by {reader} as {reader_scope:?}");
                for (which, candidate) in [("python's", token), ("ours", mine.as_str())] {
                    let got = reader_keyring.decrypt(candidate, reader_scope);
                    match (expected(outcome), got) {
                        (Ok(_), Ok(plaintext)) => assert_eq!(plaintext.as_bytes(), payload, "{context} ({which})"),
                        (Err(python), Err(e)) => {
                            // Our token's errors name the same scope and kid: the same message.
                            check_error(&format!("{context} ({which})"), python, secret_class(&e), &e.to_string())
                        }
                        (python, got) => panic!("{context} ({which}): python {python:?}, ours {got:?}"),
                    }
                }
                reads += 1;
                ours += 1;
            }
        }
    }
    println!("encrypt: {tokens} Python tokens, {reads} reads as Python read them; {ours} reads of our tokens alike");
    assert_eq!((tokens, reads), (40, 167));
}

fn flechtwerk_b64(segment: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(segment).unwrap()
}

/// SEC-12: the ratchet table — a token stamped with the writer's scope read under the reader's,
/// under an unbound key and under a key bound to `db` — accepts and refuses as Python does, with
/// Python's reason text.
#[test]
fn sec_12_ratchet_table_as_python() {
    let rows = section("ratchet");
    for row in rows {
        let row = obj(row);
        let reader = if row.contains_key("key_bound_to") { keyring("oct-scoped") } else { keyring("oct") };
        let got = reader.decrypt(s(row, "token"), s(row, "reader_scope"));
        let context = format!(
            "writer {:?} reader {:?} bound {:?}",
            s(row, "writer_scope"),
            s(row, "reader_scope"),
            row.get("key_bound_to")
        );
        match (row["accept"] == Value::Bool(true), got) {
            (true, Ok(plaintext)) => assert_eq!(plaintext.as_bytes(), b"\"v\""),
            (false, Err(e)) => {
                let error = obj(&row["error"]);
                check_error(&context, (s(error, "type"), s(error, "message")), secret_class(&e), &e.to_string());
            }
            (accept, got) => panic!("{context}: python accepts {accept}, ours {got:?}"),
        }
    }
    println!("ratchet: {} of {} rows as Python", rows.len(), rows.len());
    assert_eq!(rows.len(), 18);
}

/// SEC-10: sealing refused by the keyring's bindings before any token exists, and the controls
/// that seal (their headers as Python's).
#[test]
fn sec_10_sealing_refusals_as_python() {
    let cases = section("encrypt_errors");
    for case in cases {
        let case = obj(case);
        let scope = s(case, "scope");
        let outcome = if case["keyring"] == Value::Null {
            // Keyring.of({"a": …}, primary="a", primaries={"api": "a"}, scopes={"a": {"db"}})
            Keyring::builder()
                .oct("a", &[1; 32])
                .primary("a")
                .primary_for("api", "a")
                .bind("a", ["db"])
                .build()
                .map(|_| String::new())
                .map_err(SecretError::from)
        } else {
            keyring(s(case, "keyring")).encrypt(b"\"v\"", scope)
        };
        match (expected(&Value::Object(case.clone())), outcome) {
            (Ok(_), Ok(token)) => assert_eq!(read_header(&token).unwrap(), *obj(&case["header"])),
            (Err(python), Err(e)) => check_error(scope, python, secret_class(&e), &e.to_string()),
            (python, got) => panic!("{scope}: python {python:?}, ours {got:?}"),
        }
    }
    println!("encrypt_errors: {} of {} as Python", cases.len(), cases.len());
}

/// SEC-11, SEC-30: every malformed or odd token of the vectors: `decrypt` (bytes), `kid_of`,
/// `read_header` and `is_encrypted` give Python's outcomes (its `decrypt_bytes`: a payload that
/// is not JSON is the codec's concern).
#[test]
fn sec_11_30_malformed_tokens_as_python() {
    let cases = section("malformed_tokens");
    for case in cases {
        let case = obj(case);
        let name = s(case, "name");
        let token = s(case, "token");
        let reader = keyring(s(case, "keyring"));
        match (expected(&case["decrypt_bytes"]), reader.decrypt(token, s(case, "scope"))) {
            (Ok(python), Ok(plaintext)) => assert_eq!(plaintext.as_bytes(), unhex(s(python, "value_hex")), "{name}"),
            (Err(python), Err(e)) => check_error(name, python, secret_class(&e), &e.to_string()),
            (python, got) => panic!("{name}: python {python:?}, ours {got:?}"),
        }
        match (expected(&case["kid_of"]), kid_of(token)) {
            (Ok(python), Ok(kid)) => assert_eq!(kid, s(python, "value"), "{name}: kid_of"),
            (Err(python), Err(e)) => check_error(&format!("{name}: kid_of"), python, secret_class(&e), &e.to_string()),
            (python, got) => panic!("{name}: kid_of: python {python:?}, ours {got:?}"),
        }
        match (expected(&case["read_header"]), read_header(token)) {
            (Ok(python), Ok(header)) => assert_eq!(Value::Object(header), python["value"], "{name}: read_header"),
            (Err(python), Err(e)) => {
                check_error(&format!("{name}: read_header"), python, secret_class(&e), &e.to_string())
            }
            (python, got) => panic!("{name}: read_header: python {python:?}, ours {got:?}"),
        }
        assert_eq!(Value::Bool(is_encrypted(token)), case["is_encrypted"], "{name}: is_encrypted");
    }
    println!(
        "malformed_tokens: {} of {} as Python (decrypt, kid_of, read_header, is_encrypted)",
        cases.len(),
        cases.len()
    );
    assert_eq!(cases.len(), 45);
}

/// Signed values: Python's Ed25519 tokens are ours byte for byte (signing is deterministic), and
/// verify under every reader keyring and scope as Python verified them.
#[test]
fn sec_30_signatures_equal_pythons_and_verify_as_python() {
    let (mut tokens, mut reads) = (0, 0);
    for case in section("sign") {
        let case = obj(case);
        let token = s(case, "token");
        let payload = s(case, "payload").as_bytes();
        assert!(is_signed(token));
        assert_eq!(signer_of(token).unwrap(), s(case, "signer"));
        assert_eq!(read_header(token).unwrap(), *obj(&case["header"]));
        assert_eq!(keyring(s(case, "keyring")).sign(payload, s(case, "scope")).unwrap(), token, "signature bytes");
        tokens += 1;
        for (reader, by_scope) in obj(&case["verify"]) {
            let reader_keyring = keyring(reader);
            for (reader_scope, outcome) in obj(by_scope) {
                let context = format!("{token} verified by {reader} as {reader_scope:?}");
                match (expected(outcome), reader_keyring.verify(token, reader_scope)) {
                    (Ok(_), Ok(got)) => assert_eq!(got, payload, "{context}"),
                    (Err(python), Err(e)) => check_error(&context, python, secret_class(&e), &e.to_string()),
                    (python, got) => panic!("{context}: python {python:?}, ours {got:?}"),
                }
                reads += 1;
            }
        }
    }
    println!("sign: {tokens} signatures byte-identical to Python's, {reads} verifications as Python's");
    assert_eq!((tokens, reads), (12, 70));
}

/// Signing refused as Python refuses it (no scope, no signing key, a public-only signer).
#[test]
fn sec_30_signing_refusals_as_python() {
    let cases = section("sign_errors");
    for case in cases {
        let case = obj(case);
        let e = keyring(s(case, "keyring")).sign(b"\"v\"", s(case, "scope")).unwrap_err();
        let whole = Value::Object(case.clone());
        let python = expected(&whole).unwrap_err();
        check_error(s(case, "note"), python, secret_class(&e), &e.to_string());
    }
    println!("sign_errors: {} of {} as Python", cases.len(), cases.len());
}

/// Malformed and odd signatures: `verify`, `signer_of` and `is_signed` give Python's outcomes
/// (a payload that is not JSON verifies: parsing it is the codec's concern).
#[test]
fn sec_30_malformed_signatures_as_python() {
    let cases = section("malformed_signatures");
    let full = keyring("full");
    for case in cases {
        let case = obj(case);
        let name = s(case, "name");
        let token = s(case, "token");
        match (expected(&case["verify"]), full.verify(token, s(case, "scope"))) {
            (Ok(python), Ok(payload)) => assert_eq!(payload, canonical(&python["value"]), "{name}"),
            (Err(("JSONDecodeError", _)), Ok(payload)) => {
                assert!(json::parse(&String::from_utf8_lossy(&payload)).is_err(), "{name}")
            }
            (Err(python), Err(e)) => check_error(name, python, secret_class(&e), &e.to_string()),
            (python, got) => panic!("{name}: python {python:?}, ours {got:?}"),
        }
        match (expected(&case["signer_of"]), signer_of(token)) {
            (Ok(python), Ok(kid)) => assert_eq!(kid, s(python, "value"), "{name}: signer_of"),
            (Err(python), Err(e)) => {
                check_error(&format!("{name}: signer_of"), python, secret_class(&e), &e.to_string())
            }
            (python, got) => panic!("{name}: signer_of: python {python:?}, ours {got:?}"),
        }
        assert_eq!(Value::Bool(is_signed(token)), case["is_signed"], "{name}: is_signed");
    }
    println!("malformed_signatures: {} of {} as Python", cases.len(), cases.len());
    assert_eq!(cases.len(), 17);
}

/// SEC-31: re-sealing rotates to the new primary, promotes an unscoped token, moves `dir` to a
/// recipient, keeps the exact payload bytes, and refuses to strip a scope — as Python.
#[test]
fn sec_31_reencrypt_as_python() {
    let cases = section("reencrypt");
    for case in cases {
        let case = obj(case);
        let name = s(case, "name");
        let reader = keyring(s(case, "keyring"));
        let scope = s(case, "scope");
        match (expected(&Value::Object(case.clone())), reader.reencrypt(s(case, "token"), scope)) {
            (Ok(python), Ok(token)) => {
                assert_eq!(
                    header_without_epk_x(read_header(&token).unwrap()),
                    header_without_epk_x(obj(&python["header"]).clone()),
                    "{name}: header"
                );
                assert_eq!(
                    reader.decrypt(&token, scope).unwrap().as_bytes(),
                    unhex(s(python, "payload_preserved")),
                    "{name}"
                );
            }
            (Err(python), Err(e)) => check_error(name, python, secret_class(&e), &e.to_string()),
            (python, got) => panic!("{name}: python {python:?}, ours {got:?}"),
        }
    }
    println!("reencrypt: {} of {} as Python", cases.len(), cases.len());
}

/// SEC-02: every JWK Set document of the vectors is accepted (written back in Python's
/// canonical form, byte for byte) or refused with Python's class and message; a keyring whose
/// X25519 halves do not match loads and fails on use with Python's `KeyringError`.
#[test]
fn sec_02_keyring_documents_as_python() {
    let cases = section("keyring_documents");
    let mut refused = 0;
    for case in cases {
        let case = obj(case);
        let name = s(case, "name");
        match (case["accepted"] == Value::Bool(true), Keyring::from_json(s(case, "json"))) {
            (true, Ok(keyring)) => {
                // The written form; the mismatched-halves case records its `to_json()` as its text.
                let canonical =
                    if case.contains_key("canonical_json") { s(case, "canonical_json") } else { s(case, "json") };
                assert_eq!(keyring.to_json().as_str(), canonical, "{name}");
                if let Some(token) = case.get("decrypt_token") {
                    let Value::Str(token) = token else { panic!() };
                    for (outcome, got) in [
                        (&case["encrypt"], keyring.encrypt(b"\"v\"", "api").map(|_| ())),
                        (&case["decrypt"], keyring.decrypt(token, "api").map(|_| ())),
                    ] {
                        let python = expected(outcome).unwrap_err();
                        let e = got.unwrap_err();
                        check_error(name, python, secret_class(&e), &e.to_string());
                    }
                }
            }
            (false, Err(e)) => {
                let error = obj(&case["error"]);
                check_error(name, (s(error, "type"), s(error, "message")), keyring_class(&e), &e.to_string());
                refused += 1;
            }
            (accepted, got) => panic!("{name}: python accepts {accepted}, ours {got:?}"),
        }
    }
    println!("keyring_documents: {} of {} as Python ({refused} refused)", cases.len(), cases.len());
    assert_eq!((cases.len(), refused), (69, 55));
}

/// Password-protected keyrings: Python's files open with the password (and are refused with a
/// wrong, short or damaged one, another algorithm, an iteration count over the ceiling, an
/// unregistered header member), as Python opens and refuses them; ours carry Python's header
/// and open again.
#[test]
fn sec_02_protected_keyrings_as_python() {
    let cases = section("protected_keyrings");
    for case in cases {
        let case = obj(case);
        let name = s(case, "name");
        let password = s(case, "password");
        if let Some(outcome) = case.get("encrypt_keyring") {
            let e = keyring("oct").to_protected(password).unwrap_err();
            check_error(name, expected(outcome).unwrap_err(), keyring_class(&e), &e.to_string());
            continue;
        }
        let text = s(case, "text");
        if let Some(Value::Bool(recognised)) = case.get("is_encrypted_keyring") {
            assert_eq!(is_protected_keyring(text), *recognised, "{name}: recognised");
        }
        match (expected(&case["open"]), Keyring::from_protected(text, password)) {
            (Ok(python), Ok(keyring)) => assert_eq!(keyring.to_json().as_str(), s(python, "json"), "{name}"),
            (Err(python), Err(e)) => check_error(name, python, keyring_class(&e), &e.to_string()),
            (python, got) => panic!("{name}: python {python:?}, ours {got:?}"),
        }
        if let Some(outcome) = case.get("from_json") {
            let e = Keyring::from_json(text).unwrap_err();
            check_error(
                &format!("{name}: from_json"),
                expected(outcome).unwrap_err(),
                keyring_class(&e),
                &e.to_string(),
            );
        }
        if let Some(plain) = case.get("plain_json") {
            // What we write: Python's header member for member (a fresh salt), and it opens.
            let Value::Str(plain) = plain else { panic!() };
            let keyring = Keyring::from_json(plain).unwrap();
            let ours = keyring.to_protected(password).unwrap();
            let header = match json::parse(&String::from_utf8(flechtwerk_b64(ours.split('.').next().unwrap())).unwrap())
            {
                Ok(Value::Object(h)) => h,
                other => panic!("{other:?}"),
            };
            let mut python_header = obj(&case["header"]).clone();
            assert_eq!(flechtwerk_b64(s(&header, "p2s")).len(), 16);
            let mut mine = header.clone();
            mine.remove("p2s");
            python_header.remove("p2s");
            assert_eq!(mine, python_header, "{name}: header");
            let serialized = String::from_utf8(flechtwerk_b64(ours.split('.').next().unwrap())).unwrap();
            assert!(serialized.starts_with(
                r#"{"alg":"PBES2-HS512+A256KW","cty":"jwk-set+json","enc":"A256GCM","p2c":210000,"p2s":""#
            ));
            assert!(is_protected_keyring(&ours));
            assert_eq!(Keyring::from_protected(&format!("{ours}\n"), password).unwrap(), keyring);
        }
    }
    println!("protected_keyrings: {} of {} as Python", cases.len(), cases.len());
    assert_eq!(cases.len(), 18);
}

/// Recognition of a protected keyring, as Python's `is_encrypted_keyring`.
#[test]
fn sec_02_protected_keyring_recognition_as_python() {
    let cases = section("is_encrypted_keyring");
    for case in cases {
        let case = obj(case);
        assert_eq!(
            Value::Bool(is_protected_keyring(s(case, "text"))),
            case["is_encrypted_keyring"],
            "{:?}",
            s(case, "text")
        );
    }
    println!("is_encrypted_keyring: {} of {} as Python", cases.len(), cases.len());
    assert_eq!(cases.len(), 9);
}

/// The size limits Python probed: what round-trips there round-trips here; one byte (or one
/// scope character) more is refused when writing, where Python writes a token it cannot read.
#[test]
fn sec_10_size_limits_as_python() {
    let limits = obj(&vectors()["limits"]);
    let int = |k: &str| match limits[k] {
        Value::Int(n) => usize::try_from(n).unwrap(),
        _ => panic!(),
    };
    let full = keyring("full");
    let payload = |n: usize| format!("\"{}\"", "a".repeat(n - 2)).into_bytes();
    let max = int("dir_max_payload_bytes");
    let token = full.encrypt(&payload(max), "").unwrap();
    assert_eq!(full.decrypt(&token, "").unwrap().as_bytes(), payload(max));
    assert!(matches!(full.encrypt(&payload(max + 1), ""), Err(SecretError::TooLarge { .. })));
    let max_signed = int("jws_max_payload_bytes");
    let token = full.sign(&payload(max_signed), "api").unwrap();
    assert_eq!(full.verify(&token, "api").unwrap(), payload(max_signed));
    assert!(matches!(full.sign(&payload(max_signed + 1), "api"), Err(SecretError::TooLarge { .. })));
    for (n, sign) in [(int("dir_max_scope_chars"), false), (int("jws_max_scope_chars"), true)] {
        for (scope, fits) in [("s".repeat(n), true), ("s".repeat(n + 1), false)] {
            let k = Keyring::builder()
                .oct("oct-2026-01", &[1; 32])
                .primary("oct-2026-01")
                .generate_ed25519("sig-api")
                .bind("sig-api", [scope.as_str()])
                .signing_for(&scope, "sig-api")
                .build()
                .unwrap();
            let got = if sign {
                k.sign(b"\"v\"", &scope).and_then(|t| k.verify(&t, &scope))
            } else {
                k.encrypt(b"\"v\"", &scope).and_then(|t| k.decrypt(&t, &scope).map(|p| p.to_vec()))
            };
            match (fits, got) {
                (true, Ok(v)) => assert_eq!(v, b"\"v\""),
                (false, Err(SecretError::TooLarge { .. })) => {}
                (fits, got) => panic!("scope of {} chars, sign {sign}: fits {fits}, got {got:?}", scope.len()),
            }
        }
    }
    // A token one byte over, as Python writes it (minted here by hand), is refused on reading.
    let over = mint_dir(&[0x51; 32], r#"{"alg":"dir","enc":"A256GCM","kid":"k"}"#, &payload(max + 1));
    let reader = Keyring::builder().oct("k", &[0x51; 32]).primary("k").build().unwrap();
    let e = reader.decrypt(&over, "").unwrap_err();
    let python = obj(&limits["dir_payload_one_more_decrypt"]);
    assert_eq!(secret_class(&e), s(python, "type"));
    assert_eq!(e.to_string(), "cannot decrypt secret value; kid='k'");
    println!(
        "limits: payload {max} / {max_signed} bytes and scopes of {} / {} characters as Python; one more refused",
        int("dir_max_scope_chars"),
        int("jws_max_scope_chars")
    );
}

/// A `dir` token with any header, minted with the AEAD directly.
fn mint_dir(key: &[u8; 32], header: &str, payload: &[u8]) -> String {
    use aes_gcm::aead::{AeadInPlace, KeyInit};
    use base64::Engine as _;
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let header_segment = b64(header.as_bytes());
    let iv = [7u8; 12];
    let mut buffer = payload.to_vec();
    let tag = aes_gcm::Aes256Gcm::new(key.into())
        .encrypt_in_place_detached((&iv).into(), header_segment.as_bytes(), &mut buffer)
        .unwrap();
    format!("flenc:jwe:{header_segment}..{}.{}.{}", b64(&iv), b64(&buffer), b64(&tag))
}

/// `flechtctl keyring export` prints what `public_jwk` writes; its refusals are ours.
#[test]
fn sec_02_public_jwk_as_flechtctl_exports_it() {
    let full = keyring("full");
    let mut checked = 0;
    for run in section("cli") {
        let run = obj(run);
        let Value::List(argv) = &run["argv"] else { panic!() };
        let argv: Vec<&str> = argv.iter().map(|a| if let Value::Str(a) = a { a.as_str() } else { "" }).collect();
        if argv[1..3] != ["keyring", "export"] {
            continue;
        }
        let kid = argv[4];
        match (run["status"] == Value::Int(0), full.public_jwk(kid)) {
            (true, Ok(jwk)) => assert_eq!(jwk, s(run, "stdout")),
            (false, Err(e)) => assert_eq!(format!("flechtctl: error: {e}\n"), s(run, "stderr")),
            (ok, got) => panic!("export {kid}: python ok {ok}, ours {got:?}"),
        }
        checked += 1;
    }
    println!("cli keyring export: {checked} runs as flechtctl's");
    assert_eq!(checked, 3);
}

/// The wire values flechtwerk's codecs wrote (SEC-11 reading them): every `flenc:` token opens under the
/// scope it is stamped with, every `flsig:` token verifies, down to the signed token inside an
/// encrypted one.
#[test]
fn sec_11_python_codec_wire_values_open() {
    let keyring = keyring("python-fixture-asymmetric");
    let mut opened = 0;
    let mut open = |wire: &str| -> Vec<u8> {
        opened += 1;
        let scope = match read_header(wire).unwrap().get("flenc_scope") {
            Some(Value::Str(s)) => s.clone(),
            _ => String::new(),
        };
        if is_signed(wire) {
            keyring.verify(wire, &scope).unwrap()
        } else {
            keyring.decrypt(wire, &scope).unwrap().to_vec()
        }
    };
    for case in section("codecs") {
        let case = obj(case);
        let wires: Vec<&str> = match case.get("wire") {
            Some(Value::Str(w)) => vec![w],
            Some(Value::List(items)) => {
                items.iter().filter_map(|v| if let Value::Str(w) = v { Some(w.as_str()) } else { None }).collect()
            }
            _ => match case.get("decode_token") {
                Some(Value::Str(w)) => vec![w],
                _ => vec![],
            },
        };
        for wire in wires.into_iter().filter(|w| is_encrypted(w) || is_signed(w)) {
            let mut payload = open(wire);
            // ENCRYPTED(SIGNED(...)): the payload is the signed token as a JSON string.
            if let Ok(Value::Str(inner)) = json::parse(std::str::from_utf8(&payload).unwrap()) {
                if is_signed(&inner) {
                    payload = open(&inner);
                }
            }
            assert!(json::parse(std::str::from_utf8(&payload).unwrap()).is_ok());
        }
    }
    println!("codecs: {opened} wire tokens of flechtwerk's codecs open");
    assert!(opened >= 12, "{opened}");
}

/// One of Python's codecs, ported: decodes a wire value through our secret codec and gives the
/// result back as the inner codec's JSON (so every case compares as JSON), and encodes a value.
struct Ported {
    decode: fn(&Value) -> Result<Value, CodecError>,
    encode: fn(&Value) -> Result<Value, CodecError>,
}

macro_rules! ported {
    ($codec:expr, $inner:expr) => {{
        Ported {
            decode: |raw| Ok($inner.encode(&$codec.decode(raw)?).expect("the inner codec writes what it read")),
            encode: |value| $codec.encode(&$inner.decode(value).expect("the vector's value fits the inner codec")),
        }
    }};
}

fn ported(python: &str) -> Option<Ported> {
    Some(match python {
        "ENCRYPTED(STR)" => ported!(encrypted(STR), STR),
        "ENCRYPTED(STR, scope='api_key')" => ported!(encrypted(STR).scope("api_key"), STR),
        "ENCRYPTED(STR, read_plaintext=True)" => ported!(encrypted(STR).read_plaintext(), STR),
        "ENCRYPTED(STR, scope='api_key', read_plaintext=True)" => {
            ported!(encrypted(STR).scope("api_key").read_plaintext(), STR)
        }
        "ENCRYPTED(INT)" => ported!(encrypted(INT), INT),
        "ENCRYPTED(LIST(STR))" => ported!(encrypted(list(STR)), list(STR)),
        "LIST(ENCRYPTED(STR))" => ported!(list(encrypted(STR)), list(STR)),
        "ENCRYPTED(DICT(ANY))" => ported!(encrypted(dict(ANY)), dict(ANY)),
        "SIGNED(STR, scope='api_key')" => ported!(signed(STR, "api_key"), STR),
        "ENCRYPTED(SIGNED(STR, scope='api_key'), scope='api_key')" => {
            ported!(encrypted(signed(STR, "api_key")).scope("api_key"), STR)
        }
        // No BYTES codec in this library (bytes travel as the strings they are on the wire).
        "ENCRYPTED(BYTES)" => return None,
        other => panic!("a codec the port does not know: {other}"),
    })
}

/// The secret events recorded, as the vectors write them: `[hook, args...]`.
fn events_as_python(events: &[Observed]) -> Value {
    let call = |parts: &[&str]| Value::List(parts.iter().map(|p| Value::Str((*p).to_owned())).collect());
    Value::List(
        events
            .iter()
            .map(|e| match e {
                Observed::SecretDecrypted { scope, kid } => call(&["secret_decrypted", scope, kid]),
                Observed::SecretPlaintextRead { scope } => call(&["secret_plaintext_read", scope]),
                Observed::SecretVerified { scope, kid } => call(&["secret_verified", scope, kid]),
                Observed::SecretUnsignedRead { scope } => call(&["secret_unsigned_read", scope]),
                other => panic!("not a secret event: {other:?}"),
            })
            .collect(),
    )
}

/// One way of calling a codec that Python's vectors say fails.
type Attempt<'a> = Box<dyn Fn() -> Result<Value, CodecError> + 'a>;

fn codec_class(e: &CodecError) -> &'static str {
    match e {
        CodecError::Secret(e) => secret_class(e),
        _ => "other",
    }
}

/// SEC-04, SEC-10, SEC-11, SEC-12, SEC-13, SEC-14: flechtwerk's codecs as Python wrote them
/// (tests/golden `codecs`): each wire value Python's codec wrote decodes through ours to the same
/// value with the same events (`secret_decrypted(scope, kid)`, `secret_verified`); ours seals
/// the value with Python's header; each plaintext read is refused or tolerated as Python does
/// (same class and message, same `secret_plaintext_read` event); with no keyring, writing and
/// reading a token fail with the not-installed error before any check of the token, a plaintext
/// read with the plaintext error; the ratchet's refusals read as Python's.
#[test]
fn sec_04_10_11_12_13_14_pythons_codec_vectors_through_ours() {
    let (mut values, mut plaintext_reads, mut refusals, mut skipped) = (0, 0, 0, 0);
    for case in section("codecs") {
        let case = obj(case);
        let name = s(case, "codec");
        let Some(codec) = ported(name) else {
            skipped += 1;
            continue;
        };
        let keyring = match case.get("keyring") {
            Some(Value::Str(k)) => Some(keyring(k)),
            _ => None,
        };
        let recorder = RecordingObserver::default();
        let observe = |f: &mut dyn FnMut()| with_secret_observer(Arc::new(recorder.clone()), keyring.as_ref(), f);
        if let Some(wire) = case.get("wire") {
            let mut decoded = None;
            observe(&mut || decoded = Some((codec.decode)(wire)));
            assert_eq!(decoded.unwrap().unwrap(), case["decoded"], "{name}: decoded");
            assert_eq!(events_as_python(&recorder.events()), case["events"], "{name}: events");
            recorder.clear();
            // Ours: the same header, and it reads back.
            let mut ours = None;
            observe(&mut || ours = Some((codec.encode)(&case["value"]).unwrap()));
            let ours = ours.unwrap();
            if let (Value::Str(token), Some(Value::Object(header))) = (&ours, case.get("header")) {
                assert_eq!(
                    header_without_epk_x(read_header(token).unwrap()),
                    header_without_epk_x(header.clone()),
                    "{name}: header"
                );
            }
            let mut back = None;
            observe(&mut || back = Some((codec.decode)(&ours)));
            assert_eq!(back.unwrap().unwrap(), case["decoded"], "{name}: our token read back");
            recorder.clear();
            values += 1;
        }
        for read in match case.get("plaintext_reads") {
            Some(Value::List(reads)) => &reads[..],
            _ => &[],
        } {
            let read = obj(read);
            let mut outcome = None;
            observe(&mut || outcome = Some((codec.decode)(&read["wire"])));
            match (outcome.unwrap(), expected(&Value::Object(read.clone()))) {
                (Ok(value), Ok(python)) => assert_eq!(value, python["value"], "{name}: plaintext value"),
                (Err(ours), Err(python)) => check_error(name, python, codec_class(&ours), &ours.to_string()),
                (ours, python) => panic!("{name}: plaintext read {ours:?}, Python {python:?}"),
            }
            assert_eq!(events_as_python(&recorder.events()), read["events"], "{name}: plaintext events");
            recorder.clear();
            plaintext_reads += 1;
        }
        let token = case.get("decode_token").cloned();
        let scoped_other = ported!(encrypted(STR).scope("other"), STR);
        let mut attempts: Vec<(&str, Attempt<'_>)> = Vec::new();
        attempts.push(("encode", Box::new(|| (codec.encode)(&Value::Str("x".into())))));
        if let Some(token) = token {
            let t = token.clone();
            attempts.push(("decode", Box::new(move || (codec.decode)(&t))));
            let t = token.clone();
            attempts.push(("decode_as_other_scope", Box::new(move || (scoped_other.decode)(&t))));
            attempts.push(("decode_plaintext", Box::new(|| (codec.decode)(&Value::Str("plain".into())))));
            attempts.push(("decode_other_envelope", Box::new(|| (codec.decode)(&Value::Str("flenc:v2:xyz".into())))));
        }
        for (key, attempt) in attempts {
            let Some(python) = case.get(key) else { continue };
            let mut outcome = None;
            observe(&mut || outcome = Some(attempt()));
            match (outcome.unwrap(), expected(python)) {
                (Err(ours), Err(python)) => {
                    check_error(&format!("{name} {key}"), python, codec_class(&ours), &ours.to_string())
                }
                (ours, python) => panic!("{name} {key}: ours {ours:?}, Python {python:?}"),
            }
            refusals += 1;
        }
    }
    println!("codecs: {values} values, {plaintext_reads} plaintext reads, {refusals} refusals as Python's ({skipped} skipped: BYTES)");
    assert!(values >= 9 && plaintext_reads >= 6 && refusals >= 5, "{values} {plaintext_reads} {refusals}");
}
