//! The command-line vectors Python's flechtctl 0.17.0 recorded in tests/golden/secrets_vectors.json
//! (tests/golden/generate_secrets.py), replayed against this crate's binary without Python: the
//! `cli` section (inspect, decrypt, verify, sign — Ed25519 signatures are deterministic, so the
//! tokens must be byte-identical — encrypt, export, show, remove) and the `keyring show` of every
//! keyring and protected keyring of the file: exit status, stdout and stderr all equal (but for
//! the JSON parser's own words inside "VALUE is not valid JSON (...)").

use std::process::Command;

use flechtwerk::json::{self, Map, Value};

fn vectors() -> Map {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/secrets_vectors.json");
    match json::parse(&std::fs::read_to_string(path).unwrap()).unwrap() {
        Value::Object(map) => map,
        _ => panic!("an object"),
    }
}

fn obj(v: &Value) -> &Map {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other:?}"),
    }
}

fn text(v: &Value) -> &str {
    match v {
        Value::Str(s) => s,
        other => panic!("not a string: {other:?}"),
    }
}

/// Runs one recorded invocation with `keyring` written to the file its `KEYRING` names (and
/// `password` to a `--password-file`), and compares it with the recording.
fn replay(dir: &std::path::Path, run: &Map, keyring: Option<&str>, password: Option<&str>) {
    let keyring_path = dir.join("keyring.json");
    let _ = std::fs::remove_file(&keyring_path);
    if let Some(keyring) = keyring {
        std::fs::write(&keyring_path, keyring).unwrap();
    }
    let Value::List(argv) = &run["argv"] else { panic!("argv") };
    let mut args: Vec<String> = argv[1..]
        .iter()
        .map(|a| if text(a) == "KEYRING" { keyring_path.display().to_string() } else { text(a).to_owned() })
        .collect();
    if let Some(password) = password {
        std::fs::write(dir.join("password"), format!("{password}\n")).unwrap();
        args.extend(["--password-file".to_owned(), dir.join("password").display().to_string()]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_flechtctl")).args(&args).current_dir(dir).output().unwrap();
    let Value::Int(status) = run["status"] else { panic!("status") };
    assert_eq!(i64::from(out.status.code().unwrap()), status, "{args:?}: {out:?}");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), text(&run["stdout"]), "stdout of {args:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    let expected = text(&run["stderr"]);
    match expected.split_once("is not valid JSON (") {
        // The JSON parser's own words differ (Python: "Expecting value: line 1 column 1 (char
        // 0)"; ours: "unexpected character at byte 0"): the message around them is the same.
        Some((head, tail)) => {
            let tail = &tail[tail.rfind(')').unwrap()..];
            assert!(stderr.starts_with(&format!("{head}is not valid JSON (")) && stderr.ends_with(tail), "{stderr}");
        }
        None => assert_eq!(stderr, expected, "stderr of {args:?}"),
    }
}

#[test]
fn python_recorded_invocations_replay_alike() {
    let vectors = vectors();
    let dir = std::env::temp_dir().join(format!("flechtctl-golden-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let keyrings = obj(&vectors["keyrings"]);
    let full = text(&obj(&keyrings["full"])["json"]);
    let Value::List(protected) = &vectors["protected_keyrings"] else { panic!("protected_keyrings") };
    let protected: Vec<&Map> = protected.iter().map(obj).collect();
    let Value::List(cli) = &vectors["cli"] else { panic!("cli") };
    let mut replayed = 0;
    for run in cli.iter().map(obj) {
        let Value::List(argv) = &run["argv"] else { panic!("argv") };
        let keyring = if !argv.iter().any(|a| text(a) == "KEYRING") {
            None
        } else if text(&argv[1]) == "keyring" && text(&argv[2]) == "show" {
            // Recorded on a password-protected keyring, with no password given.
            Some(text(&protected[0]["text"]))
        } else {
            Some(full)
        };
        replay(&dir, run, keyring, None);
        replayed += 1;
    }
    assert_eq!(replayed, 15);
    for (name, keyring) in keyrings {
        replay(&dir, obj(&obj(keyring)["show"]), Some(text(&obj(keyring)["json"])), None);
        replayed += 1;
        let _ = name;
    }
    for keyring in &protected {
        if let Some(show) = keyring.get("show") {
            replay(&dir, obj(show), Some(text(&keyring["text"])), Some(text(&keyring["password"])));
            replayed += 1;
        }
    }
    eprintln!("{replayed} recorded flechtctl invocations replayed alike");
    assert_eq!(replayed, 15 + keyrings.len() + 2);
    let _ = std::fs::remove_dir_all(&dir);
}
