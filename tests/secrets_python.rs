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
    let dir = std::env::temp_dir().join(format!("flechtwerk-secrets-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cases.json");
    std::fs::write(&path, json::to_canonical_bytes(&Value::Object(cases)).unwrap()).unwrap();
    let out = Command::new(python_ref())
        .arg(repo().join("tests/python/secrets_read.py"))
        .arg(&path)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the Python reader");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "the Python reader failed");
    let answers = match json::parse(&String::from_utf8(out.stdout).unwrap()).unwrap() {
        Value::Object(map) => map,
        _ => panic!(),
    };
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
