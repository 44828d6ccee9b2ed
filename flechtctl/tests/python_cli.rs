//! This crate's `flechtctl` against Python's flechtctl 0.17.0, command by command, on the same
//! files: keyrings made by one and edited and used by the other (plain and password-protected),
//! tokens sealed or signed by one and opened or verified by the other, `inspect`, `export` and
//! `show` printing the same text, and every refusal with the same exit code and message (or, where
//! the words come from a JSON parser, the same class: exit 1 and `flechtctl: error:`).
//!
//! Needs the Python reference: `PYTHON_REF`, else `scripts/python-ref` (see tests/support).

mod support;

use flechtwerk::secrets::{is_protected_keyring, kid_of, signer_of, Keyring};
use support::{Bench, Out, Py, Rs, Side};

const PASSWORD: &str = "correct horse battery staple";

/// A keyring file's text is exactly what the other implementation would write for the same
/// keyring, and its mode is 0600.
fn assert_canonical_file(bench: &Bench, name: &str) {
    let text = bench.read(name);
    let keyring = Keyring::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(keyring.to_json().as_str(), text, "{name} is not in flechtctl's file form");
    assert_mode_0600(bench, name);
}

fn assert_mode_0600(bench: &Bench, name: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(bench.path(name)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{name} has mode {mode:o}");
}

/// `keyring show` prints the same lines from both implementations; the lines.
fn assert_show_alike(bench: &Bench, args: &[&str]) -> String {
    let py = bench.ok(Py, args);
    let rs = bench.ok(Rs, args);
    assert_eq!(py, rs, "keyring show differs for {args:?}");
    bench.count("keyring show: same lines from both");
    rs
}

/// The keyring of the tests: `k1` (oct, primary), `rec` (X25519 bound to `api`, seals it), `sig`
/// (Ed25519 bound to `api` and `zähler`, signs both) and `db-key` (oct bound to `db`, seals it),
/// each step by the other implementation than the one before, starting with `first`; what
/// `keyring show` lists then (the same from both).
fn make_keyring(bench: &Bench, name: &str, first: Side) -> String {
    let steps: [&[&str]; 5] = [
        &["keyring", "new", name, "--kid", "k1"],
        &["keyring", "add", name, "--kid", "rec", "--type", "x25519", "--scope", "api", "--primary-for", "api"],
        &[
            "keyring",
            "add",
            name,
            "--kid",
            "sig",
            "--type",
            "ed25519",
            "--scope",
            "api",
            "--scope",
            "zähler",
            "--signing-for",
            "api",
            "--signing-for",
            "zähler",
        ],
        &["keyring", "add", name, "--kid", "db-key", "--scope", "db"],
        &["keyring", "primary", name, "db-key", "--scope", "db"],
    ];
    let mut side = first;
    for step in steps {
        bench.ok(side, step);
        bench.count(&format!("keyring edit by {side:?}, file in the other's form"));
        assert_canonical_file(bench, name);
        side = side.other();
    }
    assert_show_alike(bench, &["keyring", "show", name])
}

#[test]
fn keyrings_made_by_either_are_edited_and_read_by_the_other() {
    let bench = Bench::new("keyrings");
    let from_py = make_keyring(&bench, "a.json", Py);
    let from_rs = make_keyring(&bench, "b.json", Rs);
    assert_eq!(from_py, from_rs, "the same edits list the same entries whoever made them");
    assert_eq!(
        from_py,
        "db-key  oct  private  scopes=db  roles=primary-for:db\n\
         k1  oct  private  scopes=-  roles=primary\n\
         rec  x25519  private  scopes=api  roles=primary-for:api\n\
         sig  ed25519  private  scopes=api,zähler  roles=signing-for:api,signing-for:zähler\n"
    );
    // Removing an entry drops its binding and roles; `signing` and `primary` move them.
    for (side, name) in [(Py, "b.json"), (Rs, "a.json")] {
        bench.ok(side, &["keyring", "remove", name, "db-key"]);
        bench.ok(side.other(), &["keyring", "add", name, "--kid", "k2", "--primary"]);
        bench.ok(side, &["keyring", "add", name, "--kid", "sig2", "--type", "ed25519", "--scope", "zähler"]);
        bench.ok(side.other(), &["keyring", "signing", name, "sig2", "--scope", "zähler"]);
        bench.ok(side, &["keyring", "primary", name, "k1", "--scope", "other"]);
        bench.ok(side.other(), &["keyring", "remove", name, "rec"]);
        for _ in 0..6 {
            bench.count("keyring edit by either, then read by both");
        }
        assert_canonical_file(&bench, name);
        let lines = assert_show_alike(&bench, &["keyring", "show", name]);
        assert_eq!(
            lines,
            "k1  oct  private  scopes=-  roles=primary-for:other\n\
             k2  oct  private  scopes=-  roles=primary\n\
             sig  ed25519  private  scopes=api,zähler  roles=signing-for:api\n\
             sig2  ed25519  private  scopes=zähler  roles=signing-for:zähler\n"
        );
    }
    // `new` with an X25519 primary bound to scopes, and --force over an existing file.
    for side in [Py, Rs] {
        bench.ok(side, &["keyring", "new", "a.json", "--kid", "r1", "--type", "x25519", "--scope", "api", "--force"]);
        assert_canonical_file(&bench, "a.json");
        let lines = assert_show_alike(&bench, &["keyring", "show", "a.json"]);
        assert_eq!(lines, "r1  x25519  private  scopes=api  roles=primary\n");
        bench.count("keyring new --force by either");
    }
}

#[test]
fn public_halves_exported_by_either_are_imported_by_the_other() {
    let bench = Bench::new("export");
    make_keyring(&bench, "ring.json", Rs);
    for (exporter, importer) in [(Py, Rs), (Rs, Py)] {
        // `export` prints the same JWK from both; -o writes it.
        for kid in ["rec", "sig"] {
            let py = bench.ok(Py, &["keyring", "export", "ring.json", kid]);
            let rs = bench.ok(Rs, &["keyring", "export", "ring.json", kid]);
            assert_eq!(py, rs);
            assert!(!rs.contains("\"d\""), "never a private half");
            bench.count("keyring export: same JWK from both");
        }
        bench.ok(exporter, &["keyring", "export", "ring.json", "rec", "-o", "rec.jwk"]);
        bench.ok(exporter, &["keyring", "export", "ring.json", "sig", "--output", "sig.jwk"]);
        // A writer's keyring made from the recipient's public half: it seals, cannot open.
        let writer = format!("writer-{importer:?}.json");
        bench.ok(importer, &["keyring", "import", &writer, "rec.jwk", "--primary"]);
        bench.ok(exporter, &["keyring", "import", &writer, "sig.jwk"]);
        assert_canonical_file(&bench, &writer);
        let lines = assert_show_alike(&bench, &["keyring", "show", &writer]);
        assert_eq!(
            lines,
            "rec  x25519  public  scopes=api  roles=primary\nsig  ed25519  public  scopes=api,zähler  roles=-\n"
        );
        bench.count("keyring import of the other's export");
        for sealer in [Py, Rs] {
            let token = bench.ok(sealer, &["encrypt", "-k", &writer, "--scope", "api", "{\"user\": \"ü\"}"]);
            for opener in [Py, Rs] {
                let value = bench.ok(opener, &["decrypt", "-k", "ring.json", "--scope", "api", token.trim()]);
                assert_eq!(value, "{\"user\": \"ü\"}\n");
                bench.count("token sealed with an imported public half, opened by the holder");
            }
            let refused: Vec<Out> = [Py, Rs]
                .iter()
                .map(|&s| bench.run(s, &["decrypt", "-k", &writer, "--scope", "api", token.trim()], ""))
                .collect();
            assert_eq!(refused[0], refused[1]);
            assert_eq!(refused[0].code, 1);
            assert!(refused[0].stderr.contains("can seal but not open"), "{refused:?}");
            bench.count("a seal-only keyring cannot open: same refusal");
        }
        let signed = bench.ok(exporter, &["sign", "-k", "ring.json", "--scope", "zähler", "--string", "ok"]);
        assert_eq!(bench.ok(importer, &["verify", "-k", &writer, "--scope", "zähler", signed.trim()]), "\"ok\"\n");
        bench.count("signature verified with an imported public half");
    }
}

/// The values of the token matrix: the operand, and what `decrypt` prints for it (Python's
/// `json.dumps` of the value).
const VALUES: &[(&str, &str)] = &[
    ("\"hunter2\"", "\"hunter2\""),
    ("42", "42"),
    ("-7", "-7"),
    ("1e16", "1e+16"),
    ("[1, 2.50, null, true, false]", "[1, 2.5, null, true, false]"),
    ("{\"z\": {\"b\": 1, \"a\": \"ü😀\"}, \"a\": []}", "{\"a\": [], \"z\": {\"a\": \"ü😀\", \"b\": 1}}"),
    ("123456789012345678901234567890", "123456789012345678901234567890"),
    ("\"line\\nbreak \\\"quoted\\\" \\u0001\"", "\"line\\nbreak \\\"quoted\\\" \\u0001\""),
];

#[test]
fn tokens_sealed_or_signed_by_either_open_in_the_other() {
    let bench = Bench::new("tokens");
    make_keyring(&bench, "ring.json", Py);
    // Each scope picks a sealing path: "" and "other" the primary (dir), "db" a bound oct key
    // (dir), "api" an X25519 recipient (ECDH-ES+A256KW).
    let scopes = ["", "api", "db", "other"];
    let mut signatures: std::collections::BTreeMap<(usize, &str), Vec<String>> = Default::default();
    for writer in [Py, Rs] {
        for (i, (operand, printed)) in VALUES.iter().enumerate() {
            let scope = scopes[i % scopes.len()];
            let token = bench.ok(writer, &["encrypt", "-k", "ring.json", "--scope", scope, operand]);
            let token = token.strip_suffix('\n').expect("one line");
            let expected_kid = match scope {
                "api" => "rec",
                "db" => "db-key",
                _ => "k1",
            };
            assert_eq!(kid_of(token).unwrap(), expected_kid);
            for reader in [Py, Rs] {
                let value = bench.ok(reader, &["decrypt", "-k", "ring.json", "--scope", scope, token]);
                assert_eq!(value, format!("{printed}\n"), "{writer:?} sealed {operand}, {reader:?} opened it");
                bench.count(&format!("encrypt by {writer:?}, decrypt by {reader:?}: same value printed"));
            }
            if i >= scopes.len() {
                continue;
            }
            // Once per scope: `inspect` prints the same unauthenticated header from both, and
            // reading under another scope is refused alike (the ratchet: a scoped token read
            // unscoped or under another scope; an unscoped one read scoped is the upgrade path
            // and opens).
            let py = bench.ok(Py, &["inspect", token]);
            assert_eq!(py, bench.ok(Rs, &["inspect", token]));
            bench.count("inspect: same document from both");
            let other = if scope.is_empty() { "db" } else { "" };
            let read: Vec<Out> = [Py, Rs]
                .iter()
                .map(|&s| bench.run(s, &["decrypt", "-k", "ring.json", "--scope", other, token], ""))
                .collect();
            assert_eq!(read[0], read[1], "reading {scope:?} as {other:?}");
            assert_eq!(read[0].code, if scope.is_empty() { 0 } else { 1 }, "{read:?}");
            bench.count("decrypt under another scope (ratchet): same outcome from both");
        }
        // --string: the operand is the text; decrypt --string prints it raw.
        let token = bench.ok(writer, &["encrypt", "-k", "ring.json", "--string", "--scope", "api", "hunter2 ünï"]);
        for reader in [Py, Rs] {
            assert_eq!(
                bench.ok(reader, &["decrypt", "-k", "ring.json", "--scope", "api", "--string", token.trim()]),
                "hunter2 ünï\n"
            );
            assert_eq!(
                bench.ok(reader, &["decrypt", "-k", "ring.json", "--scope", "api", token.trim()]),
                "\"hunter2 ünï\"\n"
            );
            bench.count(&format!("encrypt --string by {writer:?}, decrypt [--string] by {reader:?}"));
        }
        // Signatures: Ed25519 under the scope's signing key, verified by both.
        for (i, (operand, printed)) in VALUES.iter().enumerate().step_by(2) {
            let scope = if i % 4 == 0 { "api" } else { "zähler" };
            let token = bench.ok(writer, &["sign", "-k", "ring.json", "--scope", scope, operand]);
            let token = token.trim();
            assert_eq!(signer_of(token).unwrap(), "sig");
            // Ed25519 is deterministic: both sign the same value to the same token.
            signatures.entry((i, scope)).or_default().push(token.to_owned());
            for reader in [Py, Rs] {
                assert_eq!(
                    bench.ok(reader, &["verify", "-k", "ring.json", "--scope", scope, token]),
                    format!("{printed}\n")
                );
                bench.count(&format!("sign by {writer:?}, verify by {reader:?}: same value printed"));
            }
            if i == 0 {
                assert_eq!(bench.ok(Py, &["inspect", token]), bench.ok(Rs, &["inspect", token]));
                bench.count("inspect: same document from both");
            }
        }
        // reencrypt: an unscoped token promoted to a scope, a dir token moved to the recipient.
        let unscoped = bench.ok(writer.other(), &["encrypt", "-k", "ring.json", "\"promote me\""]);
        let moved = bench.ok(writer, &["reencrypt", "-k", "ring.json", "--scope", "api", unscoped.trim()]);
        assert_eq!(kid_of(moved.trim()).unwrap(), "rec");
        assert!(bench.ok(Rs, &["inspect", moved.trim()]).contains("\"flenc_scope\": \"api\""));
        for reader in [Py, Rs] {
            assert_eq!(
                bench.ok(reader, &["decrypt", "-k", "ring.json", "--scope", "api", moved.trim()]),
                "\"promote me\"\n"
            );
            bench.count(&format!("reencrypt by {writer:?} of the other's token, decrypt by {reader:?}"));
        }
    }
    for tokens in signatures.values() {
        assert_eq!(tokens[0], tokens[1], "Python and Rust sign alike");
        bench.count("sign: byte-identical tokens from both");
    }
}

#[test]
fn protected_keyrings_are_shared_both_ways() {
    // Each opening or sealing of a protected file costs 210,000 PBKDF2 rounds (seconds in a
    // debug build of the library), so this test keeps to the few that cover each path once
    // each way.
    let bench = Bench::new("protected");
    bench.write("pw", &format!("{PASSWORD}\n"));
    bench.write("pw-crlf", &format!("{PASSWORD}\r\n"));
    bench.write("pw2", "another long enough password\n");
    let pw = ["--password-file", "pw"];
    for (creator, editor) in [(Py, Rs), (Rs, Py)] {
        let name = format!("made-by-{creator:?}.json");
        bench.ok(creator, &["keyring", "new", &name, "--kid", "k1", "--encrypt", "--password-file", "pw"]);
        bench.ok(
            editor,
            &[&["keyring", "add", &name, "--kid", "rec", "--type", "x25519", "--scope", "api"][..], &pw].concat(),
        );
        let text = bench.read(&name);
        assert!(is_protected_keyring(&text), "{name} stays protected after an edit");
        assert!(text.ends_with('\n') && text.matches('\n').count() == 1, "one line: {text:?}");
        assert_mode_0600(&bench, &name);
        let lines = assert_show_alike(&bench, &["keyring", "show", &name, "--password-file", "pw-crlf"]);
        assert_eq!(lines, "k1  oct  private  scopes=-  roles=primary\nrec  x25519  private  scopes=api  roles=-\n");
        bench.count(&format!("protected keyring made by {creator:?}, edited by {editor:?}"));
        let token = bench.ok(creator, &[&["encrypt", "-k", &name, "--scope", "api", "[\"x\"]"][..], &pw].concat());
        let value = bench.ok(editor, &[&["decrypt", "-k", &name, "--scope", "api", token.trim()][..], &pw].concat());
        assert_eq!(value, "[\"x\"]\n");
        bench.count(&format!("protected keyring: encrypt by {creator:?}, decrypt by {editor:?}"));
    }
    // unprotect by one, protect again (another password) by the other, unprotect by the first.
    let original = Keyring::from_protected(&bench.read("made-by-Py.json"), PASSWORD).unwrap();
    for (first, second) in [(Py, Rs), (Rs, Py)] {
        let plain = format!("plain-{first:?}.json");
        bench.ok(first, &["keyring", "unprotect", "made-by-Py.json", "--password-file", "pw", "-o", &plain]);
        assert_canonical_file(&bench, &plain);
        assert!(is_protected_keyring(&bench.read("made-by-Py.json")), "unprotect leaves the keyring protected");
        assert_eq!(Keyring::from_json(&bench.read(&plain)).unwrap(), original);
        bench.ok(second, &["keyring", "protect", &plain, "--password-file", "pw2"]);
        assert!(is_protected_keyring(&bench.read(&plain)));
        assert_mode_0600(&bench, &plain);
        let again = format!("again-{first:?}.json");
        bench.write(&again, "{}");
        bench.ok(first, &["keyring", "unprotect", &plain, "--password-file", "pw2", "--output", &again, "--force"]);
        assert_eq!(Keyring::from_json(&bench.read(&again)).unwrap(), original);
        bench.count(&format!("unprotect by {first:?}, protect by {second:?}, unprotect by {first:?}"));
    }
    // import --encrypt creates a protected keyring, which the other opens.
    bench.ok(Rs, &["keyring", "export", "again-Py.json", "rec", "-o", "rec.jwk"]);
    for (creator, reader) in [(Py, Rs), (Rs, Py)] {
        let name = format!("imported-{creator:?}.json");
        bench.ok(creator, &["keyring", "import", &name, "rec.jwk", "--primary", "--encrypt", "--password-file", "pw"]);
        assert!(is_protected_keyring(&bench.read(&name)));
        let lines = bench.ok(reader, &["keyring", "show", &name, "--password-file", "pw"]);
        assert_eq!(lines, "rec  x25519  public  scopes=api  roles=primary\n");
        bench.count(&format!("import --encrypt by {creator:?}, show by {reader:?}"));
    }
}

/// How alike two refusals must be.
#[derive(Clone, Copy, PartialEq)]
enum Alike {
    /// The same exit code (1) and the same message.
    Same,
    /// The same exit code and class: exit 1 with `flechtctl: error:` (the detail comes from a
    /// JSON parser or the operating system and is worded differently), or exit 2 (usage).
    Class,
}

use Alike::{Class, Same};

#[test]
fn every_refusal_has_the_same_exit_code_and_message() {
    let bench = Bench::new("errors");
    bench.write("pw", &format!("{PASSWORD}\n"));
    bench.write("wrong-pw", "not the password at all\n");
    bench.write("short-pw", "short\n");
    make_keyring(&bench, "ring.json", Rs);
    bench.ok(Py, &["keyring", "new", "other.json", "--kid", "k1"]);
    bench.ok(Rs, &["keyring", "new", "bound.json", "--kid", "kb", "--scope", "db"]);
    bench.ok(Py, &["keyring", "new", "locked.json", "--kid", "k1", "--encrypt", "--password-file", "pw"]);
    bench.ok(Rs, &["keyring", "export", "ring.json", "rec", "-o", "rec.jwk"]);
    bench.ok(Py, &["keyring", "export", "ring.json", "sig", "-o", "sig.jwk"]);
    bench.ok(Rs, &["keyring", "import", "writer.json", "rec.jwk", "--primary"]);
    bench.write("notjson.json", "{\"keys\": [");
    bench.write("list.json", "[]");
    bench.write("nokeys.json", "{\"keys\": [], \"primary\": \"a\"}");
    bench.write("badkty.json", "{\"keys\": [{\"kty\": \"RSA\", \"kid\": \"a\"}], \"primary\": \"a\"}");
    bench.write("list.jwk", "[1]");
    bench.write("bad.jwk", "{\"kty\": ");
    bench.write("exists.json", "{}");
    bench.write("sub/x.json", "{}");
    std::fs::create_dir_all(bench.path("adir")).unwrap();
    let t_other = bench.ok(Py, &["encrypt", "-k", "ring.json", "--scope", "other", "\"v\""]).trim().to_owned();
    let t_unscoped = bench.ok(Rs, &["encrypt", "-k", "ring.json", "42"]).trim().to_owned();
    let t_api = bench.ok(Py, &["encrypt", "-k", "ring.json", "--scope", "api", "\"v\""]).trim().to_owned();
    let s_api = bench.ok(Rs, &["sign", "-k", "ring.json", "--scope", "api", "\"v\""]).trim().to_owned();
    let s_number = bench.ok(Py, &["sign", "-k", "ring.json", "--scope", "api", "7"]).trim().to_owned();
    // A flipped character in the ciphertext segment (the fourth of five).
    let tampered = {
        let mut segments: Vec<String> = t_other.split('.').map(str::to_owned).collect();
        let ciphertext = &mut segments[3];
        let flipped = if ciphertext.starts_with('A') { "B" } else { "A" };
        ciphertext.replace_range(0..1, flipped);
        segments.join(".")
    };
    let (t_other, t_unscoped, t_api, s_api, s_number, tampered) =
        (t_other.as_str(), t_unscoped.as_str(), t_api.as_str(), s_api.as_str(), s_number.as_str(), tampered.as_str());
    let pw = ["--password-file", "pw"];
    let cases: Vec<(Alike, Vec<&str>, &str)> = vec![
        // The keyring file.
        (Same, vec!["encrypt", "-k", "missing.json", "1"], ""),
        (Same, vec!["keyring", "show", "adir"], ""),
        (Class, vec!["encrypt", "-k", "notjson.json", "1"], ""),
        (Same, vec!["encrypt", "-k", "list.json", "1"], ""),
        (Same, vec!["encrypt", "-k", "nokeys.json", "1"], ""),
        (Same, vec!["decrypt", "-k", "badkty.json", t_other], ""),
        // Values and tokens.
        (Class, vec!["encrypt", "-k", "ring.json", "{"], ""),
        (Class, vec!["encrypt", "-k", "ring.json", "NaN"], ""),
        (Class, vec!["encrypt", "-k", "ring.json"], "not json\n"),
        (Same, vec!["encrypt", "-k", "bound.json", "1"], ""),
        (Same, vec!["encrypt", "-k", "bound.json", "--scope", "api", "1"], ""),
        (Same, vec!["decrypt", "-k", "ring.json", "--scope", "db", t_other], ""),
        (Same, vec!["decrypt", "-k", "ring.json", t_other], ""),
        (Same, vec!["decrypt", "-k", "other.json", "--scope", "other", t_api], ""),
        (Same, vec!["decrypt", "-k", "bound.json", "--scope", "other", t_other], ""),
        (Same, vec!["decrypt", "-k", "ring.json", "--scope", "other", tampered], ""),
        (Class, vec!["decrypt", "-k", "ring.json", "hello"], ""), // scheme checked first (docs)
        (Same, vec!["decrypt", "-k", "ring.json", "flenc:xyz:abc"], ""),
        (Same, vec!["decrypt", "-k", "ring.json", "flenc:jwe:"], ""),
        (Same, vec!["decrypt", "-k", "writer.json", "--scope", "api", t_api], ""),
        (Same, vec!["decrypt", "-k", "ring.json", "--string", t_unscoped], ""),
        (Class, vec!["decrypt", "-k", "ring.json", "--scope", "api", s_api], ""), // scheme checked first (docs)
        (Same, vec!["reencrypt", "-k", "ring.json", t_api], ""),
        (Same, vec!["reencrypt", "-k", "ring.json", "--scope", "db", t_other], ""),
        (Same, vec!["sign", "-k", "ring.json", "--scope", "", "1"], ""),
        (Same, vec!["sign", "-k", "ring.json", "--scope", "db", "1"], ""),
        (Same, vec!["verify", "-k", "ring.json", "--scope", "zähler", s_api], ""),
        (Same, vec!["verify", "-k", "other.json", "--scope", "api", s_api], ""),
        (Class, vec!["verify", "-k", "ring.json", "--scope", "api", t_other], ""), // scheme checked first (docs)
        (Same, vec!["verify", "-k", "ring.json", "--scope", "api", "--string", s_number], ""),
        (Same, vec!["inspect", "hello"], ""),
        (Same, vec!["inspect", "flsig:jwe:abc"], ""),
        (Class, vec!["inspect", "flenc:jwe:e30x.a.b.c.d"], ""),
        (Same, vec!["inspect"], "flenc:jwe:WzFd.a.b.c.d\n"),
        // Usage (exit 2).
        (Class, vec!["sign", "-k", "ring.json", "1"], ""),
        (Class, vec!["encrypt", "1"], ""),
        (Class, vec!["frobnicate"], ""),
        (Class, vec![], ""),
        (Class, vec!["keyring"], ""),
        (Class, vec!["keyring", "new", "n.json", "--kid", "e", "--type", "ed25519"], ""),
        (Class, vec!["keyring", "new", "n.json"], ""),
        (Class, vec!["keyring", "unprotect", "locked.json"], ""),
        (Class, vec!["encrypt", "-k", "ring.json", "--bogus", "1"], ""),
        (Class, vec!["encrypt", "-k", "ring.json", "1", "2"], ""),
        // Keyring edits.
        (Same, vec!["keyring", "new", "exists.json", "--kid", "k"], ""),
        (Same, vec!["keyring", "new", "./sub//x.json", "--kid", "k"], ""),
        (Same, vec!["keyring", "new", "n.json", "--kid", "r", "--type", "x25519"], ""),
        (Same, vec!["keyring", "new", "n.json", "--kid", "", "--scope", "db"], ""),
        (Same, vec!["keyring", "new", "n.json", "--kid", "k", "--scope", ""], ""),
        (Same, vec!["keyring", "add", "ring.json", "--kid", "k1"], ""),
        (Same, vec!["keyring", "add", "ring.json", "--kid", "e", "--type", "ed25519"], ""),
        (Same, vec!["keyring", "add", "ring.json", "--kid", "n", "--signing-for", "api"], ""),
        (Same, vec!["keyring", "add", "ring.json", "--kid", "n", "--scope", "db", "--primary-for", "api"], ""),
        (Same, vec!["keyring", "add", "missing.json", "--kid", "n"], ""),
        (Same, vec!["keyring", "remove", "ring.json", "k1"], ""),
        (Same, vec!["keyring", "remove", "ring.json", "nope"], ""),
        (Same, vec!["keyring", "primary", "ring.json", "nope"], ""),
        (Same, vec!["keyring", "primary", "ring.json", "sig"], ""),
        (Same, vec!["keyring", "primary", "ring.json", "db-key", "--scope", "api"], ""),
        (Same, vec!["keyring", "signing", "ring.json", "k1", "--scope", "api"], ""),
        (Same, vec!["keyring", "signing", "ring.json", "sig", "--scope", "db"], ""),
        (Same, vec!["keyring", "signing", "ring.json", "sig", "--scope", ""], ""),
        (Same, vec!["keyring", "export", "ring.json", "k1"], ""),
        (Same, vec!["keyring", "export", "ring.json", "nope"], ""),
        (Same, vec!["keyring", "import", "ring.json", "rec.jwk", "--encrypt"], ""),
        (Same, vec!["keyring", "import", "n.json", "rec.jwk"], ""),
        (Same, vec!["keyring", "import", "ring.json", "list.jwk"], ""),
        (Class, vec!["keyring", "import", "ring.json", "bad.jwk"], ""),
        (Same, vec!["keyring", "import", "ring.json", "missing.jwk"], ""),
        (Same, vec!["keyring", "import", "n.json", "sig.jwk", "--primary"], ""),
        (Same, vec!["keyring", "import", "ring.json", "rec.jwk"], ""),
        (Same, vec!["keyring", "import", "writer.json", "sig.jwk", "--signing-for", "api"], ""),
        // Passwords and protected files.
        (Same, vec!["keyring", "protect", "ring.json"], ""),
        (Same, vec!["keyring", "protect", "ring.json", "--password-file", "short-pw"], ""),
        (Same, vec!["keyring", "protect", "ring.json", "--password-file", "missing-pw"], ""),
        (Same, vec!["keyring", "protect", "locked.json", "--password-file", "pw"], ""),
        (Class, vec!["keyring", "protect", "notjson.json", "--password-file", "pw"], ""),
        (Same, vec!["keyring", "unprotect", "ring.json", "-o", "out.json"], ""),
        (Same, vec!["keyring", "unprotect", "locked.json", "-o", "exists.json"], ""),
        (Same, vec!["keyring", "unprotect", "locked.json", "-o", "out.json"], ""),
        (Same, vec!["keyring", "unprotect", "locked.json", "-o", "out.json", "--password-file", "wrong-pw"], ""),
        (Same, vec!["keyring", "unprotect", "locked.json", "-o", "out.json", "--password-file", "short-pw"], ""),
        (Same, vec!["encrypt", "-k", "locked.json", "1"], ""),
        (Same, vec!["encrypt", "-k", "locked.json", "--password-file", "wrong-pw", "1"], ""),
        (Same, vec!["encrypt", "-k", "locked.json", "--password-file", "missing-pw", "1"], ""),
        (Same, vec!["keyring", "show", "locked.json"], ""),
        (Same, vec!["keyring", "new", "n.json", "--kid", "k", "--encrypt"], ""),
        (Same, vec!["keyring", "new", "n.json", "--kid", "k", "--encrypt", "--password-file", "short-pw"], ""),
        (Same, vec!["keyring", "import", "n.json", "rec.jwk", "--primary", "--encrypt"], ""),
        (Same, [&["keyring", "add", "locked.json", "--kid", "k1"][..], &pw[..]].concat(), ""),
    ];
    let mut same = 0;
    let mut class = 0;
    for (alike, args, stdin) in &cases {
        let before = bench.snapshot();
        let py = bench.run(Py, args, stdin);
        assert_eq!(bench.snapshot(), before, "Python's flechtctl {args:?} changed a file");
        let rs = bench.run(Rs, args, stdin);
        assert_eq!(bench.snapshot(), before, "flechtctl {args:?} changed a file");
        assert_eq!(py.code, rs.code, "exit codes of {args:?}: Python {py:?}, Rust {rs:?}");
        assert_ne!(rs.code, 0, "{args:?} is refused: {rs:?}");
        assert!(rs.stdout.is_empty() && py.stdout.is_empty(), "{args:?} prints nothing on stdout");
        match (alike, rs.code) {
            (Same, 1) => {
                assert_eq!(py.stderr, rs.stderr, "messages of {args:?}");
                same += 1;
            }
            (Class, 1) => {
                for out in [&py, &rs] {
                    assert!(out.stderr.starts_with("flechtctl: error: ") && out.stderr.lines().count() == 1, "{out:?}");
                }
                class += 1;
            }
            (Class, 2) => {
                assert!(
                    py.stderr.contains("error:") && rs.stderr.contains("error:")
                        || args.is_empty()
                        || args == &["keyring"]
                );
                class += 1;
            }
            _ => panic!("{args:?}: unexpected {rs:?} (Python {py:?})"),
        }
        bench.count(&format!("refusal alike ({})", if *alike == Same { "same message" } else { "same class" }));
    }
    eprintln!("{} refusals: {same} with the same message, {class} of the same class", cases.len());
}

#[test]
fn operands_from_stdin_abbreviations_and_version() {
    let bench = Bench::new("operands");
    bench.write("pw", &format!("{PASSWORD}\n"));
    bench.ok(Rs, &["keyring", "new", "ring.json", "--kid", "k1"]);
    bench.ok(Py, &["keyring", "new", "locked.json", "--kid", "k1", "--encrypt", "--password-file", "pw"]);
    for writer in [Py, Rs] {
        // The value from standard input, one trailing newline stripped; `-` names it too; long
        // flags abbreviated as argparse allows; `-kPATH`, `--flag=value` and `--`.
        for (args, stdin, printed) in [
            (vec!["encrypt", "-k", "ring.json"], "{\"a\": 1}\n", "{\"a\": 1}"),
            (vec!["encrypt", "-k", "ring.json", "--str", "-"], "-dash\n\n", "\"-dash\\n\""),
            (vec!["encrypt", "-k", "ring.json", "--string"], "crlf\r\n", "\"crlf\\r\""),
            (vec!["encrypt", "-kring.json", "--sc=s", "--", "-1.5"], "", "-1.5"),
        ] {
            let token = bench.ok_in(writer, &args, stdin);
            let scope = if args.contains(&"--sc=s") { "s" } else { "" };
            for reader in [Py, Rs] {
                let value = bench.ok_in(reader, &["decrypt", "-k", "ring.json", "--scope", scope], &token);
                assert_eq!(value, format!("{printed}\n"), "{writer:?} {args:?} then {reader:?}");
                bench.count("operand from stdin / abbreviated flags, both ways");
            }
        }
        let token = bench.ok(writer, &["encrypt", "--keyr", "locked.json", "--pass", "pw", "true"]);
        let value =
            bench.ok_in(writer.other(), &["decrypt", "--keyring=locked.json", "--password-file=pw", "-"], &token);
        assert_eq!(value, "true\n");
        bench.count("abbreviated --password-file, both ways");
    }
    for side in [Py, Rs] {
        let out = bench.run(side, &["--version"], "");
        assert_eq!(out.code, 0);
        assert!(out.stdout.starts_with("flechtctl "), "{out:?}");
        let help = bench.run(side, &["keyring", "add", "--help"], "");
        assert_eq!(help.code, 0);
        for flag in ["--kid", "--type", "--scope", "--primary", "--primary-for", "--signing-for", "--password-file"] {
            assert!(help.stdout.contains(flag), "{side:?} help names {flag}");
        }
        bench.count("--version and --help exit 0");
    }
}
