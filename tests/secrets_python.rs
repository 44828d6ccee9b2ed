//! The other direction of tests/secrets_vectors.rs: what the Rust secrets core writes, Python's
//! flechtctl 0.17.0 reads (tests/python/secrets_read.py, run in the reference venv). Tokens carry
//! fresh randomness, so this cannot be a stored vector: each run mints new ones — `dir` and
//! ECDH-ES tokens for every payload of the golden file under several keyrings and scopes (a
//! seal-only writer's among them), Ed25519 signatures, keyring files written from fresh keys, and
//! password-protected files — and Python must open each with the same payload, or refuse it
//! with the same class where Rust refuses it too.
//!
//! Needs the Python reference: `PYTHON_REF`, else `scripts/python-ref` is run to find or install
//! it (as tests/migration_python does).

use std::process::{Command, Stdio};

#[path = "python_support/mod.rs"]
mod python_support;

use flechtwerk::json::{self, Map, Value};
use flechtwerk::secrets::{Keyring, SecretError};
use python_support::{python_ref, repo};

fn golden() -> Map {
    let text = std::fs::read_to_string(repo().join("tests/golden/secrets_vectors.json")).expect("the vector file");
    match json::parse(&text).expect("JSON") {
        Value::Object(map) => map,
        _ => panic!("an object"),
    }
}

fn str_of<'a>(m: &'a Map, key: &str) -> &'a str {
    match &m[key] {
        Value::Str(s) => s,
        other => panic!("{key}: {other:?}"),
    }
}

fn obj(v: &Value) -> &Map {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other:?}"),
    }
}

fn case(pairs: &[(&str, &str)]) -> Value {
    Value::Object(pairs.iter().map(|(k, v)| ((*k).to_owned(), Value::from(*v))).collect())
}

/// What Python must answer: the payload (or keyring file) text, or the class of its refusal.
enum Expect {
    Text(String),
    Refused(&'static str),
}

#[test]
fn sec_02_10_python_reads_what_rust_writes() {
    let golden = golden();
    let keyring_texts = obj(&golden["keyrings"]);
    let mut keyrings: Map = Map::new();
    let mut rust: Vec<(String, Keyring)> = Vec::new();
    for name in ["oct", "oct-scoped", "full", "writer", "recipient-primary", "non-ascii", "python-fixture-asymmetric"] {
        let text = str_of(obj(&keyring_texts[name]), "json");
        let keyring = Keyring::from_json(text).unwrap();
        keyrings.insert(name.to_owned(), Value::from(keyring.to_json().as_str()));
        rust.push((name.to_owned(), keyring));
    }
    // A keyring of fresh keys, written by Rust only.
    let fresh = Keyring::builder()
        .generate_oct("fresh-oct")
        .primary("fresh-oct")
        .generate_x25519("fresh-rec")
        .bind("fresh-rec", ["api"])
        .primary_for("api", "fresh-rec")
        .generate_ed25519("fresh-sig")
        .bind("fresh-sig", ["api", "zähler"])
        .signing_for("api", "fresh-sig")
        .signing_for("zähler", "fresh-sig")
        .build()
        .unwrap();
    keyrings.insert("fresh".to_owned(), Value::from(fresh.to_json().as_str()));
    rust.push(("fresh".to_owned(), fresh.clone()));
    let by_name = |name: &str| &rust.iter().find(|(n, _)| n == name).unwrap().1;

    let mut payloads: Vec<String> = Vec::new();
    for entry in match &golden["encrypt"] {
        Value::List(items) => items,
        _ => panic!(),
    } {
        let payload = str_of(obj(entry), "payload").to_owned();
        if !payloads.contains(&payload) {
            payloads.push(payload);
        }
    }

    // Tokens: (writer, scope, reader, reader scope), for every payload.
    let readings: [(&str, &str, &str, &str, Option<&'static str>); 14] = [
        ("oct", "", "oct", "", None),
        ("oct", "", "oct", "api", None),
        ("oct", "api", "oct", "api", None),
        ("oct", "api", "oct", "", Some("SecretDecryptError")),
        ("oct", "api", "oct", "db", Some("SecretDecryptError")),
        ("oct-scoped", "db", "oct-scoped", "db", None),
        ("full", "", "full", "", None),
        ("full", "api", "full", "api", None),
        ("full", "other", "full", "other", None),
        ("writer", "api", "full", "api", None),
        ("recipient-primary", "api", "recipient-primary", "api", None),
        ("non-ascii", "zähler", "non-ascii", "zähler", None),
        ("python-fixture-asymmetric", "api_key", "python-fixture-asymmetric", "api_key", None),
        ("fresh", "api", "fresh", "api", None),
    ];
    let mut tokens = Vec::new();
    let mut token_expect = Vec::new();
    for (writer, scope, reader, reader_scope, refused) in readings {
        for payload in &payloads {
            let token = by_name(writer).encrypt(payload.as_bytes(), scope).unwrap();
            // Rust reads it as Python must.
            let ours = by_name(reader).decrypt(&token, reader_scope);
            match refused {
                None => assert_eq!(ours.unwrap().as_bytes(), payload.as_bytes()),
                Some(_) => assert!(matches!(ours, Err(SecretError::Decrypt { .. }))),
            }
            tokens.push(case(&[("keyring", reader), ("token", &token), ("scope", reader_scope)]));
            token_expect.push(refused.map_or_else(|| Expect::Text(payload.clone()), Expect::Refused));
        }
    }
    let mut signatures = Vec::new();
    let mut signature_expect = Vec::new();
    for (writer, scope) in [("full", "api"), ("full", "other"), ("full", "api2"), ("fresh", "api"), ("fresh", "zähler")]
    {
        for payload in &payloads {
            let token = by_name(writer).sign(payload.as_bytes(), scope).unwrap();
            signatures.push(case(&[("keyring", writer), ("token", &token), ("scope", scope)]));
            signature_expect.push(Expect::Text(payload.clone()));
        }
    }
    let password = "correct horse battery staple";
    let files: Vec<Value> = rust.iter().map(|(_, k)| Value::from(k.to_json().as_str())).collect();
    let protected: Vec<Value> = [by_name("full"), &fresh]
        .iter()
        .map(|k| case(&[("text", &format!("{}\n", k.to_protected(password).unwrap())), ("password", password)]))
        .collect();
    let protected_expect: Vec<String> = [by_name("full"), &fresh].iter().map(|k| k.to_json().to_string()).collect();

    let mut cases = Map::new();
    cases.insert("keyrings".to_owned(), Value::Object(keyrings));
    cases.insert("files".to_owned(), Value::List(files.clone()));
    cases.insert("protected".to_owned(), Value::List(protected));
    cases.insert("tokens".to_owned(), Value::List(tokens));
    cases.insert("signatures".to_owned(), Value::List(signatures));
    let answers = python_answers("flechtwerk-secrets-python", "tests/python/secrets_read.py", cases);
    let list = |name: &str| match &answers[name] {
        Value::List(items) => items.clone(),
        _ => panic!(),
    };
    let check = |what: &str, answers: Vec<Value>, expect: &[Expect]| {
        assert_eq!(answers.len(), expect.len(), "{what}");
        for (i, (answer, expect)) in answers.iter().zip(expect).enumerate() {
            let answer = obj(answer);
            match expect {
                Expect::Text(text) => {
                    assert_eq!(answer["ok"], Value::Bool(true), "{what} #{i}: {answer:?}");
                    assert_eq!(str_of(answer, "value"), text, "{what} #{i}");
                }
                Expect::Refused(class) => {
                    assert_eq!(answer["ok"], Value::Bool(false), "{what} #{i}: {answer:?}");
                    assert_eq!(str_of(answer, "type"), *class, "{what} #{i}");
                }
            }
        }
        answers.len()
    };
    let file_expect: Vec<Expect> =
        files.iter().map(|f| if let Value::Str(text) = f { Expect::Text(text.clone()) } else { panic!() }).collect();
    let n_files = check("files", list("files"), &file_expect);
    let n_protected =
        check("protected", list("protected"), &protected_expect.into_iter().map(Expect::Text).collect::<Vec<_>>());
    let n_tokens = check("tokens", list("tokens"), &token_expect);
    let n_signatures = check("signatures", list("signatures"), &signature_expect);
    println!(
        "python reads rust: {n_files} keyring files, {n_protected} protected files, {n_tokens} tokens ({} refused alike), {n_signatures} signatures",
        token_expect.iter().filter(|e| matches!(e, Expect::Refused(_))).count()
    );
}

/// SEC-10, SEC-14: a record the Rust codecs wrote — every composition, `dir` and ECDH-ES, scoped,
/// doubled, signed then encrypted — read by Python's codecs (flechtwerk[secrets] 0.17.0, with
/// the same keyring): each field decodes to the value Rust wrote, with the events Python's
/// observer reports (one `secret_decrypted` per token opened, with its scope and kid).
#[test]
fn sec_10_14_python_codecs_read_what_ours_write() {
    use flechtwerk::attribute::{
        dict, encrypted, list, set, signed, tuple, Attribute, Date, ANY, DATE, FLOAT, INT, RECORD, STR,
    };
    use flechtwerk::secrets::with_keyring;
    use flechtwerk::{Config, Record};
    use std::collections::{BTreeMap, BTreeSet};

    const E_STR: Attribute<String> = Attribute::new("e_str", &encrypted(STR));
    const E_INT: Attribute<i64> = Attribute::new("e_int", &encrypted(INT).scope("a"));
    const E_RECIPIENT: Attribute<f64> = Attribute::new("e_recipient", &encrypted(FLOAT).scope("api_key"));
    const E_LIST: Attribute<Vec<String>> = Attribute::new("e_list", &encrypted(list(STR)));
    const LIST_E: Attribute<Vec<String>> = Attribute::new("list_e", &list(encrypted(STR)));
    const SET_E: Attribute<BTreeSet<i64>> = Attribute::new("set_e", &set(encrypted(INT)));
    const TUPLE_E: Attribute<Box<[f64]>> = Attribute::new("tuple_e", &tuple(encrypted(FLOAT)));
    const E_DICT_ANY: Attribute<BTreeMap<String, Value>> = Attribute::new("e_dict_any", &encrypted(dict(ANY)));
    const DICT_E: Attribute<BTreeMap<String, i64>> = Attribute::new("dict_e", &dict(encrypted(INT).scope("api_key")));
    const E_RECORD: Attribute<Record> = Attribute::new("e_record", &encrypted(RECORD));
    const E_E: Attribute<String> = Attribute::new("e_e", &encrypted(encrypted(STR).scope("a")).scope("api_key"));
    const E_SIGNED: Attribute<String> = Attribute::new("e_signed", &encrypted(signed(STR, "api_key")).scope("api_key"));
    const SIGNED_LIST: Attribute<Vec<i64>> = Attribute::new("signed_list", &signed(list(INT), "api_key"));
    const E_DATE: Attribute<Date> = Attribute::new("e_date", &encrypted(DATE));

    let golden = golden();
    let keyring_text = str_of(obj(&obj(&golden["keyrings"])["python-fixture-asymmetric"]), "json").to_owned();
    let keyring = Keyring::from_json(&keyring_text).unwrap();
    let parsed = |text: &str| json::parse(text).unwrap();
    let object = |text: &str| match parsed(text) {
        Value::Object(map) => map,
        _ => unreachable!(),
    };
    let strings = vec!["zähler".to_owned(), "".to_owned(), "\"quoted\"\n".to_owned()];
    let any_map: BTreeMap<String, Value> =
        object(r#"{"z": 1, "a": [true, null, 1.5], "ü": {"x": "y"}}"#).into_iter().collect();
    let int_map = BTreeMap::from([("a".to_owned(), -7), ("b".to_owned(), 1 << 40)]);
    let record = Record::wrap(object(r#"{"user": "svc", "port": 5432, "tags": ["x"]}"#));
    let date = Date::from_ymd_opt(1815, 12, 10).unwrap();
    let config = with_keyring(&keyring, || {
        Config::new()
            .with(&E_STR, "s3cret ünïcode".to_owned())?
            .with(&E_INT, 1 << 53)?
            .with(&E_RECIPIENT, 0.1)?
            .with(&E_LIST, strings.clone())?
            .with(&LIST_E, strings.clone())?
            .with(&SET_E, BTreeSet::from([3, -1, 2]))?
            .with(&TUPLE_E, Box::from([1.0, -2.5e-300]))?
            .with(&E_DICT_ANY, any_map)?
            .with(&DICT_E, int_map)?
            .with(&E_RECORD, record)?
            .with(&E_E, "twice".to_owned())?
            .with(&E_SIGNED, "vouched".to_owned())?
            .with(&SIGNED_LIST, vec![1, 2, 3])?
            .with(&E_DATE, date)
    })
    .unwrap();
    // Each field: Python's codec, its inner codec, and the inner JSON Rust wrote.
    let fields: [(&str, &str, &str, Value); 14] = [
        ("e_str", "ENCRYPTED(STR)", "STR", parsed(r#""s3cret ünïcode""#)),
        ("e_int", "ENCRYPTED(INT, scope='a')", "INT", Value::Int(1 << 53)),
        ("e_recipient", "ENCRYPTED(FLOAT, scope='api_key')", "FLOAT", Value::Float(0.1)),
        ("e_list", "ENCRYPTED(LIST(STR))", "LIST(STR)", parsed(r#"["zähler", "", "\"quoted\"\n"]"#)),
        ("list_e", "LIST(ENCRYPTED(STR))", "LIST(STR)", parsed(r#"["zähler", "", "\"quoted\"\n"]"#)),
        ("set_e", "SET(ENCRYPTED(INT))", "SET(INT)", parsed("[-1, 2, 3]")),
        ("tuple_e", "TUPLE(ENCRYPTED(FLOAT))", "TUPLE(FLOAT)", parsed("[1.0, -2.5e-300]")),
        (
            "e_dict_any",
            "ENCRYPTED(DICT(ANY))",
            "DICT(ANY)",
            parsed(r#"{"z": 1, "a": [true, null, 1.5], "ü": {"x": "y"}}"#),
        ),
        ("dict_e", "DICT(ENCRYPTED(INT, scope='api_key'))", "DICT(INT)", parsed(r#"{"a": -7, "b": 1099511627776}"#)),
        ("e_record", "ENCRYPTED(RECORD)", "RECORD", parsed(r#"{"user": "svc", "port": 5432, "tags": ["x"]}"#)),
        ("e_e", "ENCRYPTED(ENCRYPTED(STR, scope='a'), scope='api_key')", "STR", parsed(r#""twice""#)),
        ("e_signed", "ENCRYPTED(SIGNED(STR, scope='api_key'), scope='api_key')", "STR", parsed(r#""vouched""#)),
        ("signed_list", "SIGNED(LIST(INT), scope='api_key')", "LIST(INT)", parsed("[1, 2, 3]")),
        ("e_date", "ENCRYPTED(DATE)", "DATE", parsed(r#""1815-12-10""#)),
    ];
    let mut cases = Map::new();
    cases.insert("keyring".to_owned(), Value::Str(keyring_text));
    cases.insert("record".to_owned(), Value::Object(config.raw().clone()));
    cases.insert(
        "fields".to_owned(),
        Value::List(
            fields
                .iter()
                .map(|(name, codec, inner, _)| {
                    Value::List(vec![
                        Value::Str((*name).into()),
                        Value::Str((*codec).into()),
                        Value::Str((*inner).into()),
                    ])
                })
                .collect(),
        ),
    );
    let answers = python_answers("flechtwerk-secrets-codec-python", "tests/python/secrets_codec_read.py", cases);
    let decrypted = |scope: &str, kid: &str| parsed(&format!(r#"["secret_decrypted", "{scope}", "{kid}"]"#));
    for (name, codec, _, expected) in &fields {
        let answer = obj(&answers[*name]);
        assert_eq!(answer["ok"], Value::Bool(true), "{name} ({codec}): {answer:?}");
        assert_eq!(answer["value"], *expected, "{name} ({codec})");
        let Value::List(events) = &answer["events"] else { panic!() };
        let opened = events
            .iter()
            .filter(|e| matches!(e, Value::List(parts) if parts[0] == Value::Str("secret_decrypted".into())))
            .count();
        let tokens = match &config.raw()[*name] {
            Value::Str(_) if codec.starts_with("SIGNED") => 0,
            Value::Str(_) if codec.starts_with("ENCRYPTED(ENCRYPTED") => 2,
            Value::Str(_) => 1,
            Value::List(items) => items.len(),
            Value::Object(map) => map.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!(opened, tokens, "{name}: {events:?}");
    }
    let e_int = obj(&answers["e_int"]);
    assert_eq!(e_int["events"], Value::List(vec![decrypted("a", "test-key")]));
    let recipient = obj(&answers["e_recipient"]);
    assert_eq!(recipient["events"], Value::List(vec![decrypted("api_key", "test-recipient")]));
    println!("python reads rust: {} fields of a record our codecs wrote", fields.len());
}

/// Writes `cases` to a scratch directory named after `tag`, runs the Python `script` of this
/// repository on it with the reference venv, and returns the JSON object it printed.
fn python_answers(tag: &str, script: &str, cases: Map) -> Map {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cases.json");
    std::fs::write(&path, json::to_canonical_bytes(&Value::Object(cases)).unwrap()).unwrap();
    let out = Command::new(python_ref())
        .arg(repo().join(script))
        .arg(&path)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the Python reader");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "the Python reader failed");
    match json::parse(&String::from_utf8(out.stdout).unwrap()).unwrap() {
        Value::Object(map) => map,
        _ => panic!("the Python reader printed no JSON object"),
    }
}
