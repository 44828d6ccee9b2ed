//! Refusals: a wrong password, an untrusted certificate, a client on the wrong port and each
//! missing ACL end `run()` with a named error within `REFUSAL_BOUND` and commit nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
use flechtwerk::kafka::{Kafka, KafkaErrorKind, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::testing::read_topic;
use flechtwerk::Flechtwerk;

use crate::acls::{extractor_acls, grant, Grant};
use crate::counter_app::{kafka_error, nothing_committed, prepare, report, run_refused};
use crate::{credentials, env, init_logs, plaintext, secure, unique, REFUSAL_BOUND};

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

/// A refused run leaves no blocking librdkafka call behind: the runtime that ran it shuts down
/// at once. A runtime waits for its blocking threads when it is dropped, and the adapter's
/// blocking reads used to go on retrying after the refusal for their whole budget (a refused
/// stage's process then stayed up for a minute after `run()` had returned the error).
#[test]
fn a_refused_run_leaves_no_blocking_call_behind() {
    init_logs();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let took = runtime.block_on(async {
        let counter = prepare("refusedend", 10, 5).await;
        let (user, _) = credentials("KAFKA_SASL_USER");
        let wrong = Secret::new(format!("wrong-{}", unique("password")));
        let kafka: Arc<dyn Kafka> = Arc::new(secure(&user, wrong, SaslMechanism::ScramSha512));
        let (error, took) = run_refused(&counter, kafka).await;
        assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authentication, "{error}");
        took
    });
    let shutdown = Instant::now();
    drop(runtime);
    let shutdown = shutdown.elapsed();
    println!(
        "REFUSED run ended after {:.1} s, its runtime shut down in {:.1} s",
        took.as_secs_f64(),
        shutdown.as_secs_f64()
    );
    // A request of a client that never reached a broker waits 2 s at most before its retry loop
    // sees the refusal; the budget it used to run out is 60 s.
    assert!(shutdown < REFUSAL_BOUND / 3, "the runtime took {shutdown:?} to shut down after a refused run");
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
/// authorization error whose text contains `names`; returns that text.
async fn missing_acl(case: &str, missing: impl Fn(&Grant) -> Option<Grant>, names: &[&str]) -> String {
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
    error.to_string().replace(&counter.app, "{app}")
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

/// Issue 34: Write missing on the output, Describe kept. The record's topic is known, so the
/// broker refuses to add its partition to the transaction instead, and librdkafka only logs that
/// and purges the transaction's records: the error names the topic and the missing Write all
/// the same (it was "PurgeQueue", kind `Abortable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_on_the_output_with_describe_kept_is_refused() {
    let error = missing_acl(
        "nowriteout",
        |g| Some(if g.resource.1.ends_with("-out") { g.without("Write") } else { g.clone() }),
        &["{app}-out", "Topic authorization failed", "Write on the topic", "to the transaction"],
    )
    .await;
    assert!(!error.contains("PurgeQueue"), "{error}");
}

/// Issue 34: Write missing on the changelog (Read, Describe and Create kept): the refused
/// topic is named, not the output whose records were purged with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_write_on_the_changelog_is_refused() {
    let error = missing_acl(
        "nowritecl",
        |g| Some(if g.resource.1.ends_with("-changelog") { g.without("Write") } else { g.clone() }),
        &["{app}-changelog", "Topic authorization failed", "Write on the topic", "to the transaction"],
    )
    .await;
    assert!(!error.contains("{app}-out"), "the output's Write is granted: {error}");
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

/// Issue 34 for the extractor: Write missing on its output, Describe kept. Its page's
/// transaction goes through the same producer, so `run()` ends with the same named refusal, and
/// nothing reaches the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extractor_without_write_on_its_output_is_refused() {
    use flechtwerk::attribute::{Attribute, INT};
    use flechtwerk::stage::{extractor, Emit};
    use flechtwerk::{Event, Message, State};
    const CURSOR: Attribute<i64> = Attribute::new("cursor", &INT);
    init_logs();
    let app = unique("exnowrite");
    let (configs, output) = (format!("{app}-configs"), format!("{app}-out"));
    let kafka = plaintext();
    let admin = kafka.admin().expect("admin");
    admin.create_topic(&NewTopic::new(&configs, 1).replication(1).compacted()).await.expect("create");
    admin.create_topic(&NewTopic::new(&output, 1).replication(1)).await.expect("create");
    let producer = kafka.producer(ProducerConfig::idempotent(format!("{app}-writer"))).expect("writer");
    let config = ProducerRecord::new(&configs, "feed-0", "{\"on\":true}");
    producer.send(config).await.expect("send").await.expect("config");
    producer.close().await;
    let (user, password) = credentials("KAFKA_SASL_USER");
    let grants: Vec<Grant> = extractor_acls(&app, &[&configs], &[&output])
        .iter()
        .map(|g| if g.resource.1 == output { g.without("Write") } else { g.clone() })
        .collect();
    grant(&user, &grants).await;

    let out = output.clone();
    let stage = extractor([configs.as_str()]).poll(move |key, _config, state| {
        let cursor = state.get(&CURSOR)?.unwrap_or(0) + 1;
        Ok(vec![
            Emit::Message(Message::new(out.as_str(), key, Event::new().with(&CURSOR, cursor)?)),
            Emit::State(State::new().with(&CURSOR, cursor)?),
        ])
    });
    let extracting = Flechtwerk::builder()
        .application_id(&app)
        .client_id("pod-0")
        .kafka(Arc::new(secure(&user, password, SaslMechanism::ScramSha512)))
        .replication_factor(1)
        .session_timeout(Duration::from_secs(6))
        .poll_interval(Duration::from_millis(100))
        .build(stage)
        .expect("build");
    let started = Instant::now();
    let error = match tokio::time::timeout(REFUSAL_BOUND * 2, extracting.run()).await {
        Ok(Err(error)) => error,
        Ok(Ok(never)) => match never {},
        Err(_) => panic!("run() did not end within {:?}: a hang or a retry loop", REFUSAL_BOUND * 2),
    };
    let took = started.elapsed();
    report("extractor: no Write on the output, Describe kept", &error, took);
    assert_eq!(kafka_error(&error).kind(), KafkaErrorKind::Authorization, "{error}");
    let text = error.to_string();
    for name in [output.as_str(), "Topic authorization failed", "Write on the topic", "to the transaction"] {
        assert!(text.contains(name), "{name:?} not in: {text}");
    }
    assert!(took < REFUSAL_BOUND, "took {took:?}");
    let outputs = read_topic(&*kafka, &format!("{app}-check"), &output).await.expect("read");
    assert!(outputs.is_empty(), "outputs committed: {}", outputs.len());
}
