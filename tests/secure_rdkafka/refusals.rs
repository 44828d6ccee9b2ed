//! Refusals: a wrong password, an untrusted certificate, a client on the wrong port and each
//! missing ACL end `run()` with a named error within `REFUSAL_BOUND` and commit nothing.

use std::sync::Arc;

use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
use flechtwerk::kafka::{Kafka, KafkaErrorKind};

use crate::acls::{grant, Grant};
use crate::counter_app::{kafka_error, nothing_committed, prepare, report, run_refused};
use crate::{credentials, env, init_logs, secure, unique, REFUSAL_BOUND};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused() {
    init_logs();
    let counter = prepare("wrongpw", 10, 5).await;
    let (user, _) = credentials("KAFKA_SASL_USER");
    let wrong = Secret::new(format!("wrong-{}", unique("password")));
    let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, wrong.clone(), SaslMechanism::ScramSha512));
    let (error, took) = run_refused(&counter, kafka).await;
    report("wrong password", &error, took);
    let e = kafka_error(&error);
    assert_eq!(e.kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("SASL authentication failed"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    assert!(!format!("{error} {error:?}").contains(wrong.expose()), "the password is in the error");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused() {
    init_logs();
    let counter = prepare("untrusted", 10, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    // The system trust store does not know the throwaway CA that signed the broker's cert.
    let kafka: Arc<dyn Kafka> = Arc::new(
        RdKafka::new(env("KAFKA_SECURE_BOOTSTRAP"))
            .with_security(Security::sasl_ssl(SaslMechanism::ScramSha512, user, password))
            .expect("security"),
    );
    let (error, took) = run_refused(&counter, kafka).await;
    report("untrusted certificate", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("TLS handshake failed"), "{error}");
    assert!(error.to_string().contains("certificate verify failed"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_client_on_the_tls_port_is_refused() {
    init_logs();
    let counter = prepare("plainontls", 10, 5).await;
    let kafka: Arc<dyn Kafka> = Arc::new(RdKafka::new(env("KAFKA_SECURE_BOOTSTRAP")));
    let (error, took) = run_refused(&counter, kafka).await;
    report("plaintext client on the TLS port", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("plaintext client on a TLS listener"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_on_the_plaintext_port_is_refused() {
    init_logs();
    let counter = prepare("tlsonplain", 10, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let kafka: Arc<dyn Kafka> = Arc::new(
        RdKafka::new(env("KAFKA_BOOTSTRAP"))
            .with_security(
                Security::sasl_ssl(SaslMechanism::ScramSha512, user, password).with_ca_file(env("KAFKA_CA_FILE")),
            )
            .expect("security"),
    );
    let (error, took) = run_refused(&counter, kafka).await;
    report("TLS client on the plaintext port", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
    assert!(error.to_string().contains("TLS client on a plaintext listener"), "{error}");
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

/// Grants the transformer's ACLs but `missing`, runs the counter as app, expects an
/// authorization error whose text contains `names`.
async fn missing_acl(case: &str, missing: impl Fn(&Grant) -> Option<Grant>, names: &[&str]) {
    init_logs();
    let counter = prepare(case, 20, 5).await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let grants: Vec<Grant> = counter.acls().iter().filter_map(&missing).collect();
    assert_ne!(grants, counter.acls(), "the case takes something away");
    grant(&user, &grants).await;
    let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, password, SaslMechanism::ScramSha512));
    let (error, took) = run_refused(&counter, kafka).await;
    report(case, &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authorization, "{error}");
    for name in names {
        let name = name.replace("{app}", &counter.app);
        assert!(error.to_string().contains(&name), "{name:?} not in: {error}");
    }
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    nothing_committed(&counter).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_on_the_output_is_refused() {
    missing_acl(
        "nowrite",
        |g| {
            if g.resource.1.ends_with("-out") {
                None
            } else {
                Some(g.clone())
            }
        },
        &["{app}-out", "Topic authorization failed", "Write on the topic"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_transactional_id_permission_is_refused() {
    missing_acl(
        "notxnid",
        |g| (g.resource.0 != "transactional-id").then(|| g.clone()),
        &["transactional id {app}-", "Transactional Id authorization failed"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_group_read_is_refused() {
    missing_acl(
        "nogroup",
        |g| (g.resource.0 != "group").then(|| g.clone()),
        &["group {app}", "Group authorization failed"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_describe_on_a_config_topic_is_not_reported_as_missing() {
    missing_acl(
        "noconfig",
        |g| (!g.resource.1.ends_with("-configs")).then(|| g.clone()),
        &["{app}-configs", "Topic authorization failed"],
    )
    .await;
}
