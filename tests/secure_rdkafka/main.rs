//! The librdkafka adapter over TLS and SASL against Apache Kafka's SASL_SSL listener, with ACLs
//! (docs/security.md): the counter counts exactly once as the ordinary user `app` holding
//! exactly the transformer's documented ACLs, and two extractor replicas extract exactly once
//! holding exactly the extractor's; the conformance scenarios pass over SASL_SSL; a
//! wrong password, an untrusted certificate, a plaintext client on the TLS port and each missing
//! ACL end `run()` with a named error within a bound and commit nothing; no log line or error
//! of a failing run holds a password or key material.
//!
//! Needs `--features rdkafka` and the broker of `scripts/kafka start` (which `scripts/test`
//! starts): `KAFKA_BOOTSTRAP` (PLAINTEXT: topics are created, fed and checked there as the
//! super user ANONYMOUS), `KAFKA_SECURE_BOOTSTRAP`, `KAFKA_CA_FILE`, `KAFKA_SASL_ADMIN`,
//! `KAFKA_SASL_USER`. ACLs are granted with `scripts/kafka acl` (override:
//! `KAFKA_ACL_COMMAND`, a command taking AclCommand's arguments).
//!
//! `--nocapture` prints each refusal's text and time (`REFUSED ...`). Debugging aids:
//! `SECURE_TEST_DUMP_LOGS=1` prints the captured warnings and errors after each refusal,
//! `SECURE_TEST_LOG_FILE=path` writes everything the secret grep read.
//!
//! One file per subject:
//! - `acls.rs`: the ACLs of docs/security.md, granted with Kafka's AclCommand, and the tests that
//!   the documented commands are the ones granted;
//! - `counter_app.rs`: the counter the other tests run, and what a refused run must show;
//! - `connections.rs`: TLS and SASL built in, every mechanism connects, the conformance suite
//!   over SASL_SSL;
//! - `stages.rs`: a counter, an extractor and an MQTT bridge run exactly once as `app` with
//!   exactly their documented ACLs;
//! - `refusals.rs`: a wrong password, an untrusted certificate, the wrong port, each missing ACL;
//! - `secrets.rs`: no password or key material in any log line, error or `Debug`;
//! - this file: the environment, the log capture, and the plaintext and secure clients.

#![cfg(all(feature = "rdkafka", not(madsim)))]

mod acls;
mod connections;
mod counter_app;
mod refusals;
mod secrets;
mod stages;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
use flechtwerk::kafka::Kafka;

/// Refused connections and missing ACLs must end `run()` within this bound (measured: well
/// under it; see docs/security.md). Generous: the test binary runs its tests in parallel on a
/// shared 2-core machine.
const REFUSAL_BOUND: Duration = Duration::from_secs(30);

fn env(name: &str) -> String {
    std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| {
        panic!("{name} is not set: run through scripts/test, or `scripts/kafka start` and export what it prints")
    })
}

fn credentials(name: &str) -> (String, Secret) {
    let value = env(name);
    let (user, password) = value.split_once(':').unwrap_or_else(|| panic!("{name} is not user:password"));
    (user.to_owned(), Secret::new(password))
}

fn unique(what: &str) -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos();
    format!("sec-{what}-{}-{nanos:x}", std::process::id())
}

/// Every log line of this test binary (all levels of flechtwerk and librdkafka), for the grep.
fn captured() -> &'static Mutex<Vec<u8>> {
    static CAPTURED: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    CAPTURED.get_or_init(|| Mutex::new(Vec::new()))
}

struct Capture;

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        captured().lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn init_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_ansi(false)
            .with_writer(|| Capture)
            .init();
    });
}

fn plaintext() -> Arc<dyn Kafka> {
    Arc::new(RdKafka::new(env("KAFKA_BOOTSTRAP")))
}

fn secure(user: &str, password: Secret, mechanism: SaslMechanism) -> RdKafka {
    RdKafka::new(env("KAFKA_SECURE_BOOTSTRAP"))
        .with_security(Security::sasl_ssl(mechanism, user, password).with_ca_file(env("KAFKA_CA_FILE")))
        .expect("this build has TLS and SASL")
}
