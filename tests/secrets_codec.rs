//! The secret attribute codecs (feature `secrets`): `encrypted(...)` and `signed(...)` composed
//! with every codec of the library, through records as they travel (encoded, decoded, copied);
//! the ratchet and plaintext tolerance at the attribute; tampering; and no plaintext or key in
//! any text the types print.

use std::collections::{BTreeMap, BTreeSet};

use flechtwerk::attribute::{
    dict, encrypted, list, set, signed, tuple, Attribute, AttributeError, CodecError, Date, ANY, BOOL, DATE, FLOAT,
    INT, RECORD, STR,
};
use flechtwerk::json::{self, Value};
use flechtwerk::secrets::{install_keyring, is_encrypted, is_signed, with_keyring, Keyring, KeyringError, SecretError};
use flechtwerk::wire::decode_value;
use flechtwerk::{Config, Record, State};
use proptest::prelude::*;

/// One unbound oct primary, a recipient sealing `r` (bound to `r`), a signer for `s`.
fn keyring() -> Keyring {
    let x_public = *x25519_dalek::PublicKey::from(&x25519_dalek::StaticSecret::from([0x22; 32])).as_bytes();
    let ed_public = ed25519_dalek::SigningKey::from_bytes(&[0x33; 32]).verifying_key().to_bytes();
    Keyring::builder()
        .oct("oct", &[0x11; 32])
        .primary("oct")
        .x25519("rec", &x_public, Some(&[0x22; 32]))
        .bind("rec", ["r"])
        .primary_for("r", "rec")
        .ed25519("sig", &ed_public, Some(&[0x33; 32]))
        .bind("sig", ["s"])
        .signing_for("s", "sig")
        .build()
        .unwrap()
}

// Every composition of SEC-14, and more: the codec outside and inside the containers, scoped
// (dir and the recipient), doubled, signed-then-encrypted, optional.
const E_STR: Attribute<String> = Attribute::new("e_str", &encrypted(STR));
const E_INT: Attribute<i64> = Attribute::new("e_int", &encrypted(INT).scope("a"));
const E_FLOAT: Attribute<f64> = Attribute::new("e_float", &encrypted(FLOAT).scope("r"));
const E_BOOL: Attribute<bool> = Attribute::new("e_bool", &encrypted(BOOL));
const E_DATE: Attribute<Date> = Attribute::new("e_date", &encrypted(DATE));
const E_LIST: Attribute<Vec<String>> = Attribute::new("e_list", &encrypted(list(STR)));
const LIST_E: Attribute<Vec<String>> = Attribute::new("list_e", &list(encrypted(STR).scope("a")));
const SET_E: Attribute<BTreeSet<i64>> = Attribute::new("set_e", &set(encrypted(INT)));
const TUPLE_E: Attribute<Box<[f64]>> = Attribute::new("tuple_e", &tuple(encrypted(FLOAT)));
const E_DICT_ANY: Attribute<BTreeMap<String, Value>> = Attribute::new("e_dict_any", &encrypted(dict(ANY)));
const DICT_E: Attribute<BTreeMap<String, i64>> = Attribute::new("dict_e", &dict(encrypted(INT).scope("r")));
const E_RECORD: Attribute<Record> = Attribute::new("e_record", &encrypted(RECORD));
const E_E: Attribute<String> = Attribute::new("e_e", &encrypted(encrypted(STR).scope("a")).scope("r"));
const E_LIST_DICT_E: Attribute<Vec<BTreeMap<String, String>>> =
    Attribute::new("e_list_dict_e", &encrypted(list(dict(encrypted(STR)))));
const E_SIGNED: Attribute<String> = Attribute::new("e_signed", &encrypted(signed(STR, "s")).scope("s"));
const SIGNED_LIST: Attribute<Vec<i64>> = Attribute::new("signed_list", &signed(list(INT), "s"));
const OPTIONAL: Attribute<String> = Attribute::optional("optional", &encrypted(STR));

const ANY_VALUE: Attribute<Value> = Attribute::new("e_any", &encrypted(ANY));

/// JSON values without NaN or infinities (what the wire can carry).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::Float),
        ".{0,12}".prop_map(Value::Str),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::List),
            proptest::collection::btree_map("[a-z]{0,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// The record as it travels: canonical bytes on the wire, decoded again on the other side.
fn over_the_wire(config: &Config) -> Config {
    Config::wrap(decode_value(Some(&config.encode().unwrap())).unwrap())
}

fn wire_str<'a>(config: &'a Config, name: &str) -> &'a str {
    match &config.raw()[name] {
        Value::Str(s) => s,
        other => panic!("{name} is not a string on the wire: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// SEC-10, SEC-11, SEC-14: every composition round-trips through the wire, each secret
    /// field's wire value is a token (or a container of tokens), and the plain values read back
    /// equal what was written.
    #[test]
    fn sec_10_11_14_every_composition_round_trips(
        s in ".{0,40}",
        n in any::<i64>(),
        f in any::<f64>().prop_filter("finite", |f| f.is_finite()),
        b in any::<bool>(),
        days in 0i64..100_000,
        strings in proptest::collection::vec(".{0,8}", 0..5),
        ints in proptest::collection::btree_set(any::<i64>(), 0..5),
        floats in proptest::collection::vec(any::<f64>().prop_filter("finite", |f| f.is_finite()), 0..4),
        any_map in proptest::collection::btree_map("[a-z]{0,5}", json_value(), 0..4),
        int_map in proptest::collection::btree_map("[a-z]{0,5}", any::<i64>(), 0..4),
        nested in proptest::collection::vec(proptest::collection::btree_map("[a-z]{1,3}", ".{0,6}", 0..3), 0..3),
        any_value in json_value(),
    ) {
        let keyring = keyring();
        let date = Date::from_num_days_from_ce_opt(days as i32 + 1).unwrap();
        with_keyring(&keyring, || -> Result<(), TestCaseError> {
            // Built under the scoped keyring: outside it, writing a secret field needs the
            // process keyring, which only sec_04 installs (and only once it has run).
            let inner = Record::new().with(&E_STR, s.clone()).unwrap();
            let written = Config::new()
                .with(&E_STR, s.clone()).unwrap()
                .with(&E_INT, n).unwrap()
                .with(&E_FLOAT, f).unwrap()
                .with(&E_BOOL, b).unwrap()
                .with(&E_DATE, date).unwrap()
                .with(&E_LIST, strings.clone()).unwrap()
                .with(&LIST_E, strings.clone()).unwrap()
                .with(&SET_E, ints.clone()).unwrap()
                .with(&TUPLE_E, floats.clone().into_boxed_slice()).unwrap()
                .with(&E_DICT_ANY, any_map.clone()).unwrap()
                .with(&DICT_E, int_map.clone()).unwrap()
                .with(&E_RECORD, inner.clone()).unwrap()
                .with(&E_E, s.clone()).unwrap()
                .with(&E_LIST_DICT_E, nested.clone()).unwrap()
                .with(&E_SIGNED, s.clone()).unwrap()
                .with(&SIGNED_LIST, strings.iter().map(|x| x.len() as i64).collect::<Vec<_>>()).unwrap()
                .with(&OPTIONAL, None).unwrap()
                .with(&ANY_VALUE, any_value.clone()).unwrap();
            for name in ["e_str", "e_int", "e_float", "e_bool", "e_date", "e_list", "e_dict_any", "e_record", "e_e", "e_list_dict_e", "e_signed"] {
                prop_assert!(is_encrypted(wire_str(&written, name)), "{} is not a flenc token", name);
            }
            prop_assert!(is_signed(wire_str(&written, "signed_list")));
            for name in ["list_e", "set_e", "tuple_e"] {
                let Value::List(items) = &written.raw()[name] else { panic!("{name} is not a list") };
                prop_assert!(items.iter().all(|v| matches!(v, Value::Str(t) if is_encrypted(t))));
            }
            let Value::Object(map) = &written.raw()["dict_e"] else { panic!("dict_e is not an object") };
            prop_assert!(map.values().all(|v| matches!(v, Value::Str(t) if is_encrypted(t))));
            prop_assert_eq!(&written.raw()["optional"], &Value::Null); // None is null, not a token

            let read = over_the_wire(&written);
            prop_assert_eq!(read.require(&E_STR).unwrap(), s.clone());
            prop_assert_eq!(read.require(&E_INT).unwrap(), n);
            prop_assert_eq!(read.require(&E_FLOAT).unwrap().to_bits(), f.to_bits());
            prop_assert_eq!(read.require(&E_BOOL).unwrap(), b);
            prop_assert_eq!(read.require(&E_DATE).unwrap(), date);
            prop_assert_eq!(read.require(&E_LIST).unwrap(), strings.clone());
            prop_assert_eq!(read.require(&LIST_E).unwrap(), strings.clone());
            prop_assert_eq!(read.require(&SET_E).unwrap(), ints);
            prop_assert_eq!(read.require(&TUPLE_E).unwrap().iter().map(|x| x.to_bits()).collect::<Vec<_>>(), floats.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            prop_assert_eq!(read.require(&E_DICT_ANY).unwrap(), any_map);
            prop_assert_eq!(read.require(&DICT_E).unwrap(), int_map);
            prop_assert_eq!(read.require(&E_RECORD).unwrap(), inner);
            prop_assert_eq!(read.require(&E_E).unwrap(), s.clone());
            prop_assert_eq!(read.require(&E_LIST_DICT_E).unwrap(), nested);
            prop_assert_eq!(read.require(&E_SIGNED).unwrap(), s);
            prop_assert_eq!(read.require(&SIGNED_LIST).unwrap(), strings.iter().map(|x| x.len() as i64).collect::<Vec<_>>());
            prop_assert_eq!(read.get(&OPTIONAL).unwrap(), None);
            prop_assert_eq!(read.require(&ANY_VALUE).unwrap(), any_value);
            Ok(())
        })?;
    }

    /// SEC-11: any one byte of a secret field's token changed, inside a record that travels, is
    /// an error when the field is read — never a value, right or wrong — for `dir`, the
    /// recipient, a signature, and a token inside a list.
    #[test]
    fn sec_11_a_tampered_field_never_reads_as_a_value(
        secret in ".{1,40}",
        field in 0..4usize,
        at in any::<prop::sample::Index>(),
        mask in 1..0x80u8,
    ) {
        const DIR: Attribute<String> = Attribute::new("dir", &encrypted(STR));
        const RECIPIENT: Attribute<String> = Attribute::new("recipient", &encrypted(STR).scope("r"));
        const SIGNED: Attribute<String> = Attribute::new("signed", &signed(STR, "s"));
        const IN_LIST: Attribute<Vec<String>> = Attribute::new("in_list", &list(encrypted(STR)));
        let keyring = keyring();
        with_keyring(&keyring, || -> Result<(), TestCaseError> {
            let mut config = Config::new();
            match field {
                0 => config.set(&DIR, secret.clone()).unwrap(),
                1 => config.set(&RECIPIENT, secret.clone()).unwrap(),
                2 => config.set(&SIGNED, secret.clone()).unwrap(),
                _ => config.set(&IN_LIST, vec![secret.clone()]).unwrap(),
            }
            let (name, slot) = config.raw_mut().iter_mut().next().unwrap();
            let name = name.clone();
            let token = match slot {
                Value::Str(token) => token,
                Value::List(items) => match &mut items[0] {
                    Value::Str(token) => token,
                    _ => unreachable!(),
                },
                _ => unreachable!(),
            };
            let mut bytes = std::mem::take(token).into_bytes();
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
            *token = String::from_utf8(bytes).expect("ASCII stays ASCII");
            let read = over_the_wire(&config);
            let outcome = match field {
                0 => read.get(&DIR).map(|_| ()),
                1 => read.get(&RECIPIENT).map(|_| ()),
                2 => read.get(&SIGNED).map(|_| ()),
                _ => read.get(&IN_LIST).map(|_| ()),
            };
            let secret_error = |e: &CodecError| match e {
                CodecError::Secret(_) => true,
                CodecError::Element { source, .. } => matches!(**source, CodecError::Secret(_)),
                _ => false,
            };
            prop_assert!(matches!(&outcome, Err(AttributeError::Codec { name: n, source }) if *n == name && secret_error(source)), "{:?}", outcome);
            Ok(())
        })?;
    }

    /// SEC-12 at the attribute: a field written by a codec of scope `w` reads back through a codec
    /// of scope `r` exactly when `w` is empty or equal to `r` (written unscoped, the ratchet
    /// accepts it; scoped, only the same scope).
    #[test]
    fn sec_12_the_ratchet_at_the_attribute(secret in ".{0,20}", writer in 0..3usize, reader in 0..3usize) {
        const BY_SCOPE: [Attribute<String>; 3] = [
            Attribute::new("f", &encrypted(STR)),
            Attribute::new("f", &encrypted(STR).scope("a")),
            Attribute::new("f", &encrypted(STR).scope("b")),
        ];
        let keyring = keyring();
        with_keyring(&keyring, || -> Result<(), TestCaseError> {
            let written = Config::new().with(&BY_SCOPE[writer], secret.clone()).unwrap();
            let read = over_the_wire(&written).require(&BY_SCOPE[reader]);
            if writer == 0 || writer == reader {
                prop_assert_eq!(read.unwrap(), secret);
            } else {
                let error = read.unwrap_err().to_string();
                prop_assert!(error.contains(if reader == 0 { "downgrade" } else { "scope mismatch" }), "{}", error);
                prop_assert!(secret.len() < 4 || !error.contains(&secret), "the secret is in the error");
            }
            Ok(())
        })?;
    }
}

/// SEC-13: a plaintext value is refused unless the codec tolerates it; the refusal names the
/// scope and never the value; a tolerated one is decoded through the inner codec (no keyring
/// needed).
#[test]
fn sec_13_plaintext_refused_or_tolerated() {
    const STRICT: Attribute<String> = Attribute::new("token", &encrypted(STR).scope("vendor"));
    const TOLERANT: Attribute<String> = Attribute::new("token", &encrypted(STR).scope("vendor").read_plaintext());
    const TOLERANT_INT: Attribute<i64> = Attribute::new("token", &encrypted(INT).read_plaintext());
    let legacy = Config::wrap(decode_value(Some(br#"{"token":"sk_live_in_clear"}"#)).unwrap());
    let refused = legacy.require(&STRICT).unwrap_err();
    assert_eq!(
        refused,
        AttributeError::Codec {
            name: "token",
            source: CodecError::Secret(SecretError::Plaintext { scope: "vendor".into() })
        }
    );
    assert_eq!(
        refused.to_string(),
        "attribute \"token\": secret value is plaintext but read_plaintext is off for this attribute; scope='vendor'"
    );
    assert_eq!(legacy.require(&TOLERANT).unwrap(), "sk_live_in_clear");
    // The inner codec's refusal of a tolerated plaintext value withholds the value.
    let error = legacy.require(&TOLERANT_INT).unwrap_err().to_string();
    assert!(error.contains("expected int, found str") && !error.contains("sk_live"), "{error}");
    // Non-strings are plaintext too (only a `flenc:` string is ciphertext).
    let number = Config::wrap(decode_value(Some(br#"{"token":42}"#)).unwrap());
    assert_eq!(number.require(&TOLERANT_INT).unwrap(), 42);
    assert!(matches!(
        number.require(&STRICT),
        Err(AttributeError::Codec { source: CodecError::Secret(SecretError::Plaintext { .. }), .. })
    ));
}

/// SEC-15: tokens pass through everything but a typed write unchanged — decoding, copies, merges,
/// a config sent on as an event, state carried forward — so stored state re-encodes to the same
/// bytes; a typed write seals again, with a fresh IV.
#[test]
fn sec_15_tokens_pass_through_copies_byte_stable() {
    const SEEN: Attribute<i64> = Attribute::new("seen", &INT);
    let keyring = keyring();
    with_keyring(&keyring, || {
        let state = State::new().with(&E_STR, "hunter2".to_owned()).unwrap().with(&LIST_E, vec!["a".into()]).unwrap();
        let stored = state.encode().unwrap();
        // Restored from the changelog, a counter bumped, stored again: the tokens are untouched.
        let mut restored = State::wrap(decode_value(Some(&stored)).unwrap());
        let copy = restored.clone();
        restored.set(&SEEN, 1).unwrap();
        restored.delete(&SEEN).unwrap();
        assert_eq!(restored.encode().unwrap(), stored);
        assert_eq!(copy.encode().unwrap(), stored);
        let mut merged = Record::new();
        merged.update(&restored);
        assert_eq!(merged.encode().unwrap(), stored);
        let as_event = flechtwerk::Event::from(Config::from(restored.clone().into_record()).into_record());
        assert_eq!(as_event.encode().unwrap(), stored);
        // A typed write of the same value seals again: another IV, other bytes, same value.
        let mut rewritten = restored.clone();
        rewritten.set(&E_STR, "hunter2".to_owned()).unwrap();
        assert_ne!(rewritten.encode().unwrap(), stored);
        assert_eq!(rewritten.require(&E_STR).unwrap(), restored.require(&E_STR).unwrap());
    });
}

/// SEC-04: a codec with no keyring is a named error, when writing and when reading a token; a
/// process keyring is found by codecs outside any scope, a second different one is refused.
#[test]
fn sec_04_no_keyring_is_an_error_and_the_process_keyring_is_one() {
    let keyring = keyring();
    let sealed = with_keyring(&keyring, || Config::new().with(&E_STR, "hunter2".to_owned()).unwrap());
    // This test binary installs a process keyring only here, after these checks; the other
    // tests use scoped keyrings, so none is installed yet (tests in one binary share the process).
    let not_installed = CodecError::Secret(SecretError::Keyring(KeyringError::NotInstalled));
    assert_eq!(
        Config::new().with(&E_STR, "x".to_owned()).unwrap_err(),
        AttributeError::Codec { name: "e_str", source: not_installed.clone() }
    );
    assert_eq!(sealed.require(&E_STR).unwrap_err(), AttributeError::Codec { name: "e_str", source: not_installed });
    install_keyring(keyring.clone()).unwrap();
    install_keyring(keyring.clone()).unwrap();
    assert_eq!(sealed.require(&E_STR).unwrap(), "hunter2");
    let other = Keyring::builder().oct("other", &[9; 32]).primary("other").build().unwrap();
    assert_eq!(install_keyring(other.clone()), Err(KeyringError::Conflict));
    // A scoped keyring comes before the process's.
    let error = with_keyring(&other, || sealed.require(&E_STR)).unwrap_err().to_string();
    assert!(error.contains("kid='oct'") && !error.contains("hunter2"), "{error}");
}

/// Hygiene: no plaintext, no key byte in the text or `Debug` of any error the codecs give, nor in
/// the `Debug` of a record holding tokens.
#[test]
fn no_plaintext_or_key_in_errors_or_debug() {
    const SECRET: &str = "correct horse battery staple";
    const NUMBER: Attribute<i64> = Attribute::new("e_str", &encrypted(INT).scope("a"));
    const SCOPE_A: Attribute<String> = Attribute::new("e_str", &encrypted(STR).scope("a"));
    const OTHER_SCOPE: Attribute<String> = Attribute::new("e_str", &encrypted(STR).scope("b"));
    let keyring = keyring();
    let texts = with_keyring(&keyring, || {
        let config = Config::new().with(&SCOPE_A, SECRET.to_owned()).unwrap();
        let wrong_type = config.require(&NUMBER).unwrap_err();
        let wrong_scope = config.require(&OTHER_SCOPE).unwrap_err();
        let mut broken = config.clone();
        broken.raw_mut().insert("e_str".into(), Value::Str(wire_str(&config, "e_str").replace('.', "..")));
        let malformed = broken.require(&SCOPE_A).unwrap_err();
        let not_json_float = Config::new().with(&E_FLOAT, f64::NAN).unwrap_err();
        vec![
            format!("{config:?}"),
            format!("{wrong_type} {wrong_type:?}"),
            format!("{wrong_scope} {wrong_scope:?}"),
            format!("{malformed} {malformed:?}"),
            format!("{not_json_float} {not_json_float:?}"),
            format!("{keyring:?}"),
        ]
    });
    for text in &texts {
        assert!(!text.contains(SECRET) && !text.contains("horse"), "plaintext in: {text}");
        assert!(!text.contains("NaN"), "a refused value is quoted in: {text}");
        assert!(!text.contains("ERERERERERERERER"), "key bytes (base64url) in: {text}");
        assert!(!text.contains("[17, 17, 17"), "key bytes in: {text}");
    }
    assert!(texts[1].contains("expected int, found str"), "{}", texts[1]);
}

/// The canonical JSON sealed is Python's (`canonical_json`): keys sorted, compact, UTF-8, so
/// an encrypted record or dict is the same payload on both sides.
#[test]
fn sec_10_payload_is_the_canonical_json_of_the_inner_value() {
    let keyring = keyring();
    let record =
        Record::wrap(match json::parse(r#"{"z": 1, "a": [1.5, "ü"], "m": {"y": null, "b": true}}"#).unwrap() {
            Value::Object(map) => map,
            _ => unreachable!(),
        });
    let sealed = with_keyring(&keyring, || Config::new().with(&E_RECORD, record).unwrap());
    let opened = keyring.decrypt(wire_str(&sealed, "e_record"), "").unwrap();
    assert_eq!(opened.as_bytes(), r#"{"a":[1.5,"ü"],"m":{"b":true,"y":null},"z":1}"#.as_bytes());
}

/// SEC-31: a codec's `encrypt_value` is the token a typed write stores, and its `reencrypt`
/// re-seals under the current primary, promoting an unscoped token into its scope, never
/// stripping one.
#[test]
fn sec_31_encrypt_value_and_reencrypt_through_the_codec() {
    use flechtwerk::attribute::{EncryptedCodec, StrCodec};
    use flechtwerk::secrets::kid_of;
    const UNSCOPED: EncryptedCodec<StrCodec> = encrypted(STR);
    const SCOPED: EncryptedCodec<StrCodec> = encrypted(STR).scope("a");
    const READ_SCOPED: Attribute<String> = Attribute::new("v", &SCOPED);
    let old = keyring();
    let token = with_keyring(&old, || UNSCOPED.encrypt_value(&"hunter2".to_owned())).unwrap();
    let rotated = old.to_builder().oct("new", &[0x44; 32]).primary("new").build().unwrap();
    let promoted = with_keyring(&rotated, || SCOPED.reencrypt(&token)).unwrap();
    assert_eq!(kid_of(&promoted).unwrap(), "new");
    assert_eq!(flechtwerk::secrets::read_header(&promoted).unwrap().get("flenc_scope"), Some(&Value::Str("a".into())));
    let config = Config::wrap([("v".to_owned(), Value::Str(promoted.clone()))].into_iter().collect());
    assert_eq!(with_keyring(&rotated, || config.require(&READ_SCOPED)).unwrap(), "hunter2");
    // No stripping: the unscoped codec refuses the scoped token.
    let error = with_keyring(&rotated, || UNSCOPED.reencrypt(&promoted)).unwrap_err();
    assert!(error.to_string().contains("downgrade"), "{error}");
}
