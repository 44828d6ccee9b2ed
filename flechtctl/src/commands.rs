//! What each command does, in the order Python's flechtctl does it (which matters for which
//! refusal an operator sees first when several apply).

use std::io::Write as _;

use flechtwerk::json::{self, Map, Value};
use flechtwerk::secrets::{is_encrypted, is_protected_keyring, read_header, Keyring, KeyringBuilder, KeyringError};
use zeroize::{Zeroize as _, Zeroizing};

use crate::error::{CliError, Result};
use crate::files::{display_path, existing_password, new_password, read_operand, read_text, write_private, write_text};
use crate::{Command, KeyType, KeyringCommand, KeyringOption, PasswordOption, Roles, SealingType};

pub(crate) fn run(command: Command) -> Result<()> {
    match command {
        Command::Decrypt { keyring, scope, string, token } => {
            let keyring = crypto_keyring(&keyring)?;
            let token = read_operand(token.as_deref())?;
            let plaintext = keyring.decrypt(&token, &scope)?;
            print_value(parse_payload(&plaintext)?, string)
        }
        Command::Encrypt { keyring, scope, string, value } => {
            let keyring = crypto_keyring(&keyring)?;
            let payload = read_value(value.as_deref(), string)?;
            println(&keyring.encrypt(&payload, &scope)?)
        }
        Command::Inspect { token } => {
            let token = read_operand(token.as_deref())?;
            let header = read_header(&token)?;
            let envelope = if is_encrypted(&token) { "flenc:jwe" } else { "flsig:jws" };
            let document = Map::from([
                ("authenticated".to_owned(), Value::Bool(false)),
                ("envelope".to_owned(), Value::from(envelope)),
                ("header".to_owned(), Value::Object(header)),
            ]);
            println(&crate::pyjson::dumps_indented(&Value::Object(document)))
        }
        Command::Keyring { command } => keyring_command(command),
        Command::Reencrypt { keyring, scope, token } => {
            let keyring = crypto_keyring(&keyring)?;
            let token = read_operand(token.as_deref())?;
            println(&keyring.reencrypt(&token, &scope)?)
        }
        Command::Sign { keyring, scope, string, value } => {
            let keyring = crypto_keyring(&keyring)?;
            let payload = read_value(value.as_deref(), string)?;
            println(&keyring.sign(&payload, &scope)?)
        }
        Command::Verify { keyring, scope, string, token } => {
            let keyring = crypto_keyring(&keyring)?;
            let token = read_operand(token.as_deref())?;
            let payload = Zeroizing::new(keyring.verify(&token, &scope)?);
            print_value(parse_payload(&payload)?, string)
        }
    }
}

fn keyring_command(command: KeyringCommand) -> Result<()> {
    match command {
        KeyringCommand::Add { keyring: path, password, kid, kind, scope, roles } => {
            let (keyring, password) = open_keyring(&path, &password)?;
            if keyring.kids().any(|k| k == kid) {
                return Err(KeyringError::DuplicateKid { kid }.into());
            }
            let builder = keyring.to_builder();
            let builder = match kind {
                KeyType::Oct => builder.generate_oct(&kid),
                KeyType::X25519 => builder.generate_x25519(&kid),
                KeyType::Ed25519 => builder.generate_ed25519(&kid),
            };
            let added = bind(builder, &kid, &scope).build()?;
            save_keyring(&path, &with_roles(&added, &kid, &roles)?, password.as_ref())
        }
        KeyringCommand::Export { keyring: path, password, kid, output } => {
            let text = open_keyring(&path, &password)?.0.public_jwk(&kid)?;
            match output {
                Some(out) => write_text(&out, &text),
                None => print(&text),
            }
        }
        KeyringCommand::Import { keyring: path, password, jwkfile, encrypt, roles } => {
            let text = read_text(&jwkfile)?;
            let mut jwk = json::parse(&text).map_err(|e| CliError::Value(e.to_string()))?;
            let kid = match &jwk {
                Value::Object(map) => match map.get("kid") {
                    Some(Value::Str(kid)) => kid.clone(),
                    _ => String::new(),
                },
                other => return Err(KeyringError::JwkNotObject { got: python_type(other) }.into()),
            };
            wipe(&mut jwk);
            let (keyring, password) = if std::path::Path::new(&path).exists() {
                if encrypt {
                    return Err(CliError::Value(
                        "--encrypt only applies when import creates the keyring; use flechtctl keyring protect"
                            .to_owned(),
                    ));
                }
                let (keyring, password) = open_keyring(&path, &password)?;
                (keyring.to_builder().jwk(&text)?.build()?, password)
            } else {
                if !roles.primary {
                    return Err(CliError::Value("a new keyring needs a primary: pass --primary".to_owned()));
                }
                let keyring = Keyring::builder().jwk(&text)?.primary(&kid).build()?;
                let password = if encrypt { Some(new_password(password.password_file.as_deref())?) } else { None };
                (keyring, password)
            };
            save_keyring(&path, &with_roles(&keyring, &kid, &roles)?, password.as_ref())
        }
        KeyringCommand::New { keyring: path, password, kid, kind, scope, force, encrypt } => {
            if std::path::Path::new(&path).exists() && !force {
                return Err(CliError::Value(format!(
                    "{} already exists — pass --force to overwrite it",
                    display_path(&path)
                )));
            }
            let password = if encrypt { Some(new_password(password.password_file.as_deref())?) } else { None };
            let builder = match kind {
                SealingType::Oct => Keyring::builder().generate_oct(&kid),
                SealingType::X25519 => Keyring::builder().generate_x25519(&kid),
            };
            let keyring = bind(builder.primary(&kid), &kid, &scope).build()?;
            save_keyring(&path, &keyring, password.as_ref())
        }
        KeyringCommand::Primary { keyring: path, password, kid, scope } => {
            let (keyring, password) = open_keyring(&path, &password)?;
            let builder = match scope.as_deref() {
                Some(scope) if !scope.is_empty() => keyring.to_builder().primary_for(scope, &kid),
                _ => keyring.to_builder().primary(&kid),
            };
            save_keyring(&path, &builder.build()?, password.as_ref())
        }
        KeyringCommand::Protect { keyring: path, password } => {
            let text = read_text(&path)?;
            if is_protected_keyring(&text) {
                return Err(CliError::Value(format!("{path} is already password-protected")));
            }
            let keyring = Keyring::from_json(&text)?;
            let password = new_password(password.password_file.as_deref())?;
            save_keyring(&path, &keyring, Some(&password))
        }
        KeyringCommand::Remove { keyring: path, password, kid } => {
            let (keyring, password) = open_keyring(&path, &password)?;
            if !keyring.kids().any(|k| k == kid) {
                return Err(CliError::KeyringCommand(format!("the keyring holds no key {}", crate::files::repr(&kid))));
            }
            if kid == keyring.primary() {
                return Err(CliError::KeyringCommand(format!(
                    "{} is the primary key — set another primary first (flechtctl keyring primary)",
                    crate::files::repr(&kid)
                )));
            }
            save_keyring(&path, &keyring.to_builder().remove(&kid).build()?, password.as_ref())
        }
        KeyringCommand::Show { keyring: path, password } => {
            let keyring = open_keyring(&path, &password)?.0;
            let mut lines = String::new();
            for entry in describe(&keyring) {
                let roles = entry.roles.join(",");
                let scopes = entry.scopes.join(",");
                lines.push_str(&format!(
                    "{}  {}  {}  scopes={}  roles={}\n",
                    entry.kid,
                    entry.kind,
                    entry.half,
                    if scopes.is_empty() { "-" } else { &scopes },
                    if roles.is_empty() { "-" } else { &roles },
                ));
            }
            print(&lines)
        }
        KeyringCommand::Signing { keyring: path, password, kid, scope } => {
            let (keyring, password) = open_keyring(&path, &password)?;
            save_keyring(&path, &keyring.to_builder().signing_for(&scope, &kid).build()?, password.as_ref())
        }
        KeyringCommand::Unprotect { keyring: path, password, output, force } => {
            let text = read_text(&path)?;
            if !is_protected_keyring(&text) {
                return Err(CliError::Value(format!("{path} is not password-protected")));
            }
            if std::path::Path::new(&output).exists() && !force {
                return Err(CliError::Value(format!(
                    "{} already exists — pass --force to overwrite it",
                    display_path(&output)
                )));
            }
            let password = existing_password(password.password_file.as_deref())?;
            let keyring = Keyring::from_protected(&text, &password)?;
            write_private(&output, &keyring.to_json())
        }
    }
}

/// The keyring of a crypto command (`-k/--keyring`).
fn crypto_keyring(option: &KeyringOption) -> Result<Keyring> {
    Ok(open_keyring(&option.path, &option.password)?.0)
}

/// The keyring in file `path` and, when the file is password-protected, the password that
/// opened it (so that a changed keyring is written protected again, never silently plain).
fn open_keyring(path: &str, password: &PasswordOption) -> Result<(Keyring, Option<Zeroizing<String>>)> {
    let text = read_text(path)?;
    if is_protected_keyring(&text) {
        let password = existing_password(password.password_file.as_deref())?;
        Ok((Keyring::from_protected(&text, &password)?, Some(password)))
    } else {
        Ok((Keyring::from_json(&text)?, None))
    }
}

fn save_keyring(path: &str, keyring: &Keyring, password: Option<&Zeroizing<String>>) -> Result<()> {
    match password {
        None => write_private(path, &keyring.to_json()),
        Some(password) => write_private(path, &(keyring.to_protected(password)? + "\n")),
    }
}

fn bind(builder: KeyringBuilder, kid: &str, scopes: &[String]) -> KeyringBuilder {
    if scopes.is_empty() {
        builder
    } else {
        builder.bind(kid, scopes.iter().cloned())
    }
}

/// The keyring with the roles `--primary`, `--primary-for` and `--signing-for` give `kid`
/// (checked after the entry itself, as flechtctl checks them).
fn with_roles(keyring: &Keyring, kid: &str, roles: &Roles) -> Result<Keyring> {
    let mut builder = keyring.to_builder();
    if roles.primary {
        builder = builder.primary(kid);
    }
    for scope in &roles.primary_for {
        builder = builder.primary_for(scope, kid);
    }
    for scope in &roles.signing_for {
        builder = builder.signing_for(scope, kid);
    }
    Ok(builder.build()?)
}

/// The value operand as the payload bytes to seal or sign: its canonical JSON (with `--string`,
/// the text as a JSON string).
fn read_value(operand: Option<&str>, string: bool) -> Result<Zeroizing<Vec<u8>>> {
    let text = read_operand(operand)?;
    let mut value = if string {
        Value::Str(text.to_string())
    } else {
        json::parse(&text)
            .map_err(|e| CliError::Value(format!("VALUE is not valid JSON ({e}) — pass --string for a plain string")))?
    };
    let bytes = json::to_canonical_bytes(&value).map_err(|e| CliError::Value(e.to_string()));
    wipe(&mut value);
    Ok(Zeroizing::new(bytes?))
}

/// A decrypted or verified payload as JSON.
fn parse_payload(bytes: &[u8]) -> Result<Value> {
    let text = std::str::from_utf8(bytes).map_err(|e| CliError::Value(format!("the payload is not UTF-8: {e}")))?;
    json::parse(text).map_err(|e| CliError::Value(e.to_string()))
}

/// Prints a value as JSON, or with `raw` a string value as its text; the value is wiped then.
fn print_value(mut value: Value, raw: bool) -> Result<()> {
    let text = match (&value, raw) {
        (Value::Str(s), true) => Ok(Zeroizing::new(s.clone())),
        (_, true) => {
            Err(CliError::Value("the value is not a JSON string — drop --string to print it as JSON".to_owned()))
        }
        (value, false) => Ok(Zeroizing::new(crate::pyjson::dumps(value))),
    };
    wipe(&mut value);
    println(&text?)
}

fn println(text: &str) -> Result<()> {
    print(&format!("{text}\n"))
}

fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| CliError::Os(e.to_string()))
}

/// Python's name of a JSON value's type, for "got list" messages.
fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Int(_) | Value::BigInt(_) => "int",
        Value::Float(_) => "float",
        Value::Str(_) => "str",
        Value::List(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Overwrites every string of a parsed value before it is dropped.
fn wipe(value: &mut Value) {
    match value {
        Value::Str(s) => s.zeroize(),
        Value::List(items) => items.iter_mut().for_each(wipe),
        Value::Object(map) => map.values_mut().for_each(wipe),
        _ => {}
    }
}

/// One line of `keyring show`.
struct Described {
    kid: String,
    kind: &'static str,
    half: &'static str,
    scopes: Vec<String>,
    roles: Vec<String>,
}

/// What `keyring show` lists, read from the keyring's own file form (kinds, halves, bindings and
/// designations; the key material is wiped unread).
fn describe(keyring: &Keyring) -> Vec<Described> {
    let text = keyring.to_json();
    let mut document = match json::parse(&text) {
        Ok(Value::Object(document)) => document,
        _ => unreachable!("a keyring's file form is a JSON object"),
    };
    let designations = |member: &str| -> Vec<(String, String)> {
        match document.get(member) {
            Some(Value::Object(map)) => map
                .iter()
                .filter_map(|(scope, kid)| match kid {
                    Value::Str(kid) => Some((scope.clone(), kid.clone())),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    let primaries = designations("flenc_primaries");
    let signing = designations("flenc_signing");
    let mut out = Vec::new();
    if let Some(Value::List(keys)) = document.get("keys") {
        for key in keys {
            let Value::Object(jwk) = key else { continue };
            let Some(Value::Str(kid)) = jwk.get("kid") else { continue };
            let kind = match (jwk.get("kty"), jwk.get("crv")) {
                (Some(Value::Str(kty)), _) if kty == "oct" => "oct",
                (_, Some(Value::Str(crv))) if crv == "X25519" => "x25519",
                _ => "ed25519",
            };
            let half = if kind == "oct" || jwk.contains_key("d") { "private" } else { "public" };
            let scopes = match jwk.get("flenc_scopes") {
                Some(Value::List(scopes)) => scopes
                    .iter()
                    .filter_map(|s| match s {
                        Value::Str(s) => Some(s.clone()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let mut roles = Vec::new();
            if kid == keyring.primary() {
                roles.push("primary".to_owned());
            }
            roles.extend(primaries.iter().filter(|(_, k)| k == kid).map(|(scope, _)| format!("primary-for:{scope}")));
            roles.extend(signing.iter().filter(|(_, k)| k == kid).map(|(scope, _)| format!("signing-for:{scope}")));
            out.push(Described { kid: kid.clone(), kind, half, scopes, roles });
        }
    }
    document.values_mut().for_each(wipe);
    out
}
