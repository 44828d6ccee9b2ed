//! Properties of the secrets core (feature `secrets`): round trips under both algorithms, the
//! scope ratchet as a table, tampering, and no key material in any text the types print.

use flechtwerk::secrets::{Keyring, KeyringError, SecretError};
use proptest::prelude::*;

/// One unbound oct primary, a recipient sealing `r` (bound to `r`), a signer for `s`.
fn keyring() -> Keyring {
    Keyring::builder()
        .oct("oct", &[0x11; 32])
        .primary("oct")
        .x25519("rec", &x25519_public(), Some(&[0x22; 32]))
        .bind("rec", ["r"])
        .primary_for("r", "rec")
        .ed25519("sig", &ed25519_public(), Some(&[0x33; 32]))
        .bind("sig", ["s"])
        .signing_for("s", "sig")
        .build()
        .unwrap()
}

fn x25519_public() -> [u8; 32] {
    *x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from([0x22; 32])).as_bytes()
}

fn ed25519_public() -> [u8; 32] {
    ed25519_dalek::SigningKey::from_bytes(&[0x33; 32]).verifying_key().to_bytes()
}

/// Scopes: unscoped, two plain ones, the recipient's, and one outside ASCII.
fn scope() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("a".to_owned()),
        Just("b".to_owned()),
        Just("r".to_owned()),
        Just("zähler".to_owned())
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// SEC-10, SEC-11: any payload sealed for any scope opens under that scope to the same bytes
    /// (`dir` for most scopes, ECDH-ES for `r`), and re-sealing keeps them.
    #[test]
    fn sec_10_11_round_trip(payload in proptest::collection::vec(any::<u8>(), 0..2048), scope in scope()) {
        let keyring = keyring();
        let token = keyring.encrypt(&payload, &scope).unwrap();
        let opened = keyring.decrypt(&token, &scope).unwrap();
        prop_assert_eq!(opened.as_bytes(), &payload[..]);
        let resealed = keyring.reencrypt(&token, &scope).unwrap();
        let reopened = keyring.decrypt(&resealed, &scope).unwrap();
        prop_assert_eq!(reopened.as_bytes(), &payload[..]);
    }

    /// Signatures round-trip and are deterministic.
    #[test]
    fn sec_30_sign_round_trip(payload in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let keyring = keyring();
        let token = keyring.sign(&payload, "s").unwrap();
        prop_assert_eq!(&token, &keyring.sign(&payload, "s").unwrap());
        prop_assert_eq!(keyring.verify(&token, "s").unwrap(), payload);
    }

    /// Tampering: any one byte of a token changed (to any other ASCII byte) is refused — never a
    /// plaintext, right or wrong — for both algorithms and for signatures.
    #[test]
    fn sec_11_any_flipped_byte_is_refused(
        payload in proptest::collection::vec(any::<u8>(), 0..256),
        kind in 0..3usize,
        at in any::<prop::sample::Index>(),
        mask in 1..0x80u8,
    ) {
        let keyring = keyring();
        let token = match kind {
            0 => keyring.encrypt(&payload, "a").unwrap(),
            1 => keyring.encrypt(&payload, "r").unwrap(),
            _ => keyring.sign(&payload, "s").unwrap(),
        };
        let mut bytes = token.into_bytes();
        let i = at.index(bytes.len());
        bytes[i] ^= mask;
        let tampered = String::from_utf8(bytes).expect("ASCII stays ASCII");
        match kind {
            0 => prop_assert!(keyring.decrypt(&tampered, "a").is_err(), "{} opened", tampered),
            1 => prop_assert!(keyring.decrypt(&tampered, "r").is_err(), "{} opened", tampered),
            _ => prop_assert!(keyring.verify(&tampered, "s").is_err(), "{} verified", tampered),
        }
    }

    /// SEC-12: the ratchet as a table over arbitrary scope names — a token stamped `w` read as
    /// `r` opens exactly when `w` is empty or `w == r`; under a key bound to `b` only when,
    /// moreover, `w` is one of `b`.
    #[test]
    fn sec_12_ratchet_table(writer in "[ab]{0,2}", reader in "[ab]{0,2}", bound in proptest::collection::btree_set("[ab]{1,2}", 1..3)) {
        let unbound = Keyring::builder().oct("k", &[5; 32]).primary("k").build().unwrap();
        let token = unbound.encrypt(b"1", &writer).unwrap();
        let accept = writer.is_empty() || writer == reader;
        prop_assert_eq!(unbound.decrypt(&token, &reader).is_ok(), accept);
        let bound_reader = Keyring::builder().oct("k", &[5; 32]).bind("k", bound.iter().cloned()).primary("k").build().unwrap();
        let got = bound_reader.decrypt(&token, &reader);
        prop_assert_eq!(got.is_ok(), accept && bound.contains(&writer), "{:?}", got);
        if let Err(e) = got {
            let refused_by_the_scope_rules = matches!(e, SecretError::Decrypt { reason: Some(_), .. });
            prop_assert!(refused_by_the_scope_rules, "{:?}", e);
        }
    }
}

/// No key, password or plaintext in any `Debug` or `Display` output: the keyring, its builder,
/// a plaintext, and an error of every kind the vectors' refusals produce, each formatted both
/// ways and searched for every key's bytes (hex, base64url, standard base64 and raw), the
/// password and the plaintext.
#[test]
fn no_key_material_in_any_text() {
    let password = "correct horse battery staple";
    let secret_payload = b"\"hunter2-the-plaintext\"";
    let keyring = keyring();
    let json = keyring.to_json();
    let mut texts: Vec<String> = vec![format!("{keyring:?}"), format!("{:?}", keyring.to_builder())];
    let token = keyring.encrypt(secret_payload, "a").unwrap();
    let recipient_token = keyring.encrypt(secret_payload, "r").unwrap();
    let signed = keyring.sign(secret_payload, "s").unwrap();
    let plaintext = keyring.decrypt(&token, "a").unwrap();
    texts.push(format!("{plaintext:?}"));
    let protected = keyring.to_protected(password).unwrap();
    let mut errors: Vec<SecretError> = vec![
        keyring.decrypt(&token, "b").unwrap_err(),
        keyring.decrypt(&token, "").unwrap_err(),
        keyring.decrypt(&format!("{}x", &token[..token.len() - 1]), "a").unwrap_err(),
        keyring.decrypt(&recipient_token.replace('.', ".x"), "r").unwrap_err(),
        keyring.decrypt("flenc:jwe:e30.a.b.c.d", "").unwrap_err(),
        keyring.decrypt("plain", "").unwrap_err(),
        keyring.verify(&signed, "b").unwrap_err(),
        keyring.verify(&format!("{}A", &signed[..signed.len() - 2]), "s").unwrap_err(),
        keyring.sign(secret_payload, "").unwrap_err(),
        keyring.encrypt(&vec![b'a'; 60_000], "").unwrap_err(),
    ];
    let mismatched = Keyring::builder()
        .oct("o", &[0x44; 32])
        .primary("o")
        .x25519("x", &[9; 32], Some(&[0x55; 32]))
        .bind("x", ["x"])
        .primary_for("x", "x")
        .build()
        .unwrap();
    errors.push(mismatched.encrypt(secret_payload, "x").unwrap_err());
    let mut keyring_errors: Vec<KeyringError> = vec![
        Keyring::from_protected(&protected, "correct horse battery stapler").unwrap_err(),
        Keyring::from_protected(&protected, "short").unwrap_err(),
        Keyring::from_json(&protected).unwrap_err(),
        Keyring::from_json(&json.replace("\"keys\": [", "\"keys\": [,")).unwrap_err(),
        Keyring::from_json(&json.replace("\"k\": \"", "\"k\": \"*")).unwrap_err(),
        Keyring::from_json(&json.replace("\"k\": \"", "\"k\": \"AAAA")).unwrap_err(),
        keyring.public_jwk("oct").unwrap_err(),
        Keyring::builder().oct("k", &[0x66; 31]).primary("k").build().unwrap_err(),
    ];
    keyring_errors.push(keyring.to_protected("short").unwrap_err());
    for e in errors.drain(..) {
        texts.push(format!("{e:?}"));
        texts.push(e.to_string());
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            texts.push(format!("{s:?} {s}"));
            source = s.source();
        }
    }
    for e in keyring_errors.drain(..) {
        texts.push(format!("{e:?}"));
        texts.push(e.to_string());
    }
    use base64::Engine as _;
    let mut needles: Vec<String> = vec![password.to_owned(), "hunter2".to_owned()];
    for key in [[0x11u8; 32], [0x22; 32], [0x33; 32], [0x44; 32], [0x55; 32], [0x66; 32]] {
        needles.push(key.iter().map(|b| format!("{b:02x}")).collect());
        needles.push(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key));
        needles.push(base64::engine::general_purpose::STANDARD.encode(key));
        needles.push(format!("{:?}", &key[..8]));
        needles.push(String::from_utf8_lossy(&key[..8]).into_owned());
    }
    for text in &texts {
        for needle in &needles {
            assert!(!text.contains(needle.as_str()), "{needle:?} in {text:?}");
        }
    }
    println!("{} texts checked for {} needles", texts.len(), needles.len());
}
