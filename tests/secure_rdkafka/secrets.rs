//! Secrets: with librdkafka's debug output on and a client key given as PEM, neither a password
//! nor the key appears in any captured log line, error or `Debug`.

use std::collections::BTreeMap;
use std::sync::Arc;

use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
use flechtwerk::kafka::KafkaErrorKind;

use crate::acls::{grant, Grant};
use crate::counter_app::{kafka_error, prepare, report, run_refused};
use crate::{captured, credentials, env, init_logs, unique};

/// librdkafka's debug output on (every context), a client key given as PEM.
fn debugging(user: &str, password: Secret, key: &ClientKey) -> RdKafka {
    let mut settings = BTreeMap::new();
    settings.insert("debug".to_owned(), "all".to_owned());
    RdKafka::with_settings(env("KAFKA_SECURE_BOOTSTRAP"), settings)
        .expect("debug is no reserved setting")
        .with_security(
            Security::sasl_ssl(SaslMechanism::ScramSha512, user, password)
                .with_ca_file(env("KAFKA_CA_FILE"))
                .with_client_certificate_pem(key.certificate.clone(), Secret::new(key.key.clone()), None),
        )
        .expect("security")
}

/// Two failing runs with librdkafka's debug output on (every context) and a client key given as
/// PEM — one with the real password that gets as far as the first transaction (every ACL but
/// Write on the output), one with a wrong password: neither password nor the key appears in any
/// captured log line, error or `Debug`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_leak_into_logs_or_errors() {
    init_logs();
    let counter = prepare("secrets", 10, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let grants: Vec<Grant> = counter.acls().into_iter().filter(|g| !g.resource.1.ends_with("-out")).collect();
    grant(&user, &grants).await;
    let key = client_key();
    let kafka = debugging(&user, password.clone(), &key);
    let printed = format!("{kafka:?}");
    let (error, took) = run_refused(&counter, Arc::new(kafka)).await;
    report("no Write on the output, debug=all (secret grep run)", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authorization, "{error}");
    let wrong = Secret::new(format!("wrong-{}", unique("pw")));
    let (wrong_error, _) = run_refused(&counter, Arc::new(debugging(&user, wrong.clone(), &key))).await;
    assert_eq!(kafka_error(&wrong_error).kind(), KafkaErrorKind::Authentication, "{wrong_error}");

    let logs = String::from_utf8_lossy(&captured().lock().expect("capture").clone()).into_owned();
    if let Some(path) = std::env::var_os("SECURE_TEST_LOG_FILE") {
        std::fs::write(path, &logs).expect("writing the captured logs");
    }
    assert!(logs.contains("librdkafka"), "librdkafka's logs were captured");
    assert!(logs.contains("sasl.password = [redacted]"), "librdkafka dumped its configuration, redacted");
    assert!(logs.lines().count() > 1000, "debug output was captured ({} lines)", logs.lines().count());
    let key_lines: Vec<&str> = key.key.lines().filter(|l| !l.starts_with("-----") && l.len() >= 16).collect();
    assert!(!key_lines.is_empty());
    let texts = [
        ("logs", logs.as_str()),
        ("error", &format!("{error} {error:?}")),
        ("wrong-password error", &format!("{wrong_error} {wrong_error:?}")),
        ("RdKafka Debug", &printed),
    ];
    for (what, text) in texts {
        assert!(!text.contains(password.expose()), "the password is in the {what}");
        assert!(!text.contains(wrong.expose()), "the wrong password is in the {what}");
        for line in &key_lines {
            assert!(!text.contains(line), "key material is in the {what}");
        }
    }
    println!(
        "secret grep: {} captured log lines ({} bytes), the errors and Debug: no password, no key line",
        logs.lines().count(),
        logs.len()
    );
}

struct ClientKey {
    certificate: String,
    key: String,
}

/// A self-signed certificate and its unencrypted key (openssl, as scripts/kafka uses).
fn client_key() -> ClientKey {
    let dir = std::env::temp_dir().join(unique("client-key"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let status = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=app"])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(status.success());
    let key = ClientKey {
        certificate: std::fs::read_to_string(dir.join("cert.pem")).expect("cert"),
        key: std::fs::read_to_string(dir.join("key.pem")).expect("key"),
    };
    let _ = std::fs::remove_dir_all(&dir);
    key
}
