//! Secrets in a running application (features `secrets`, `prometheus`), on the in-process
//! cluster: the keyring given through the builder, lazy decryption of config and state fields in
//! the stage's code, tokens carried through unchanged, the secret events and metric families,
//! and — with every log line captured at debug level — no plaintext or key byte in anything the
//! run printed, in any error, or in any record it wrote.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use flechtwerk::attribute::{encrypted, Attribute, INT, STR};
use flechtwerk::kafka::{Kafka, NewTopic, ProducerConfig, ProducerRecord};
use flechtwerk::observer::prometheus::Metrics;
use flechtwerk::secrets::{is_encrypted, with_keyring, Keyring};
use flechtwerk::stage::transformer;
use flechtwerk::testing::{read_topic, Observed, RecordingObserver};
use flechtwerk::{Config, Event, Flechtwerk, Message, State};
use flechtwerk_sim::cluster::LocalCluster;

const API_KEY: &str = "sk_live_51HxQ9eSuperSecret";
const STATE_SECRET: &str = "state-plaintext-Zq8vW2";
const KEY_BYTES: [u8; 32] = [0x5a; 32];
/// `KEY_BYTES` as base64url, as a keyring file holds it.
const KEY_B64: &str = "WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpaWlo";

const VENDOR_KEY: Attribute<String> = Attribute::new("api_key", &encrypted(STR).scope("vendor").read_plaintext());
const NOTE: Attribute<String> = Attribute::new("note", &STR);
const SEALED: Attribute<String> = Attribute::new("sealed", &encrypted(STR));
const LENGTH: Attribute<i64> = Attribute::new("length", &INT);
const SEEN: Attribute<i64> = Attribute::new("seen", &INT);

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

fn keyring() -> Keyring {
    let text = format!(r#"{{"keys": [{{"kty": "oct", "kid": "k-2026", "k": "{KEY_B64}"}}], "primary": "k-2026"}}"#);
    let keyring = Keyring::from_json(&text).unwrap();
    assert_eq!(keyring, Keyring::builder().oct("k-2026", &KEY_BYTES).primary("k-2026").build().unwrap());
    keyring
}

async fn produce(kafka: &LocalCluster, topic: &str, key: &str, value: Vec<u8>) {
    let producer = kafka.producer(ProducerConfig::idempotent("seed")).unwrap();
    producer.send(ProducerRecord::new(topic, key, value)).await.unwrap().await.unwrap();
    producer.close().await;
}

/// SEC-04, SEC-05, SEC-06, SEC-11, SEC-13, SEC-15 in a run: a transformer reads an encrypted
/// config field (and a legacy plaintext one) lazily in its code, keeps a secret in its state,
/// and forwards a config's token untouched; the events reach this application's observer and
/// its Prometheus families; nothing printed holds a secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec_05_06_13_15_secrets_in_a_run_never_leak() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
        .with_ansi(false)
        .with_writer(|| Capture)
        .init();
    let kafka = Arc::new(LocalCluster::new());
    let admin = kafka.admin().unwrap();
    admin.create_topic(&NewTopic::new("vendors", 1).compacted()).await.unwrap();
    admin.create_topic(&NewTopic::new("requests", 1)).await.unwrap();
    admin.create_topic(&NewTopic::new("out", 1)).await.unwrap();
    let keyring = keyring();
    let sealed = with_keyring(&keyring, || {
        Config::new().with(&VENDOR_KEY, API_KEY.to_owned()).unwrap().with(&NOTE, "acme".to_owned()).unwrap()
    });
    let token = match &sealed.raw()["api_key"] {
        flechtwerk::json::Value::Str(token) => token.clone(),
        other => panic!("{other:?}"),
    };
    produce(&kafka, "vendors", "acme", sealed.encode().unwrap()).await;
    produce(&kafka, "vendors", "legacy", br#"{"api_key":"legacy-in-clear","note":"old"}"#.to_vec()).await;
    for key in ["acme", "legacy", "acme"] {
        produce(&kafka, "requests", key, b"{}".to_vec()).await;
    }

    let stage = transformer(["requests"]).config_topics(["vendors"]).transform(|msg, mut state, out| {
        let Some(config) = out.configs().get(&msg.key)? else { return Ok(()) };
        let api_key = config.require(&VENDOR_KEY)?; // decrypted here, in the stage's code
        let seen = state.get(&SEEN)?.unwrap_or(0) + 1;
        state.set(&SEEN, seen)?;
        state.set(&SEALED, format!("{STATE_SECRET}-{seen}"))?;
        if seen > 1 {
            // Written in the earlier batch and restored: it reads back.
            assert!(state.require(&SEALED)?.starts_with(STATE_SECRET));
        }
        out.send(Message::new("out", msg.key.as_str(), Event::new().with(&LENGTH, api_key.len() as i64)?));
        out.send(Message::new("out", format!("{}-config", msg.key), Event::from(config.into_record())));
        out.set_state(state);
        Ok(())
    });
    let recorder = RecordingObserver::default();
    let app = Flechtwerk::builder()
        .application_id("secret-app")
        .client_id("pod-0")
        .kafka(kafka.clone())
        .keyring(keyring.clone())
        .observer(Arc::new(recorder.clone()))
        .metrics(Metrics::unserved())
        .metrics_labels([("app", "secrets")])
        .build(stage)
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(async move {
        let result = app.run_until(async { stopped.await.unwrap_or(()) }).await;
        (app, result)
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let outputs = loop {
        let outputs = read_topic(&*kafka, "reader", "out").await.unwrap();
        if outputs.len() >= 6 {
            break outputs;
        }
        assert!(tokio::time::Instant::now() < deadline, "outputs: {outputs:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.send(()).unwrap();
    let (app, result) = running.await.unwrap();
    result.unwrap();

    // The values the stage read.
    let keys: Vec<String> =
        outputs.iter().map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, ["acme", "acme", "acme-config", "acme-config", "legacy", "legacy-config"]);
    let at = |key: &str| keys.iter().position(|k| k == key).unwrap();
    let event = |i: usize| Event::wrap(flechtwerk::wire::decode_value(outputs[i].value.as_deref()).unwrap());
    assert_eq!(event(at("acme")).require(&LENGTH).unwrap(), API_KEY.len() as i64);
    assert_eq!(event(at("legacy")).require(&LENGTH).unwrap(), "legacy-in-clear".len() as i64);
    // SEC-15: the config forwarded as an event carries the very token the writer sealed.
    let forwarded = outputs[at("acme-config")].value.as_deref().unwrap();
    assert_eq!(forwarded, &sealed.encode().unwrap()[..]);
    assert!(String::from_utf8_lossy(forwarded).contains(&token));

    // The state on the changelog holds a token, and opens to what the stage wrote.
    let changelog = read_topic(&*kafka, "reader", "secret-app-changelog").await.unwrap();
    let acme = changelog.iter().rev().find(|r| r.key.as_deref() == Some(&b"acme"[..])).unwrap();
    let last = State::wrap(flechtwerk::wire::decode_value(acme.value.as_deref()).unwrap());
    let flechtwerk::json::Value::Str(stored) = &last.raw()["sealed"] else { panic!("{last:?}") };
    assert!(is_encrypted(stored));
    assert_eq!(with_keyring(&keyring, || last.require(&SEALED)).unwrap(), format!("{STATE_SECRET}-2"));

    // SEC-06, SEC-11, SEC-13: the events, to this application's observer.
    let events = recorder.events();
    assert_eq!(events.iter().filter(|e| **e == Observed::KeyringKeyLoaded { kid: "k-2026".into() }).count(), 1);
    let decrypted = Observed::SecretDecrypted { scope: "vendor".into(), kid: "k-2026".into() };
    assert_eq!(events.iter().filter(|e| **e == decrypted).count(), 2, "{events:?}");
    let plaintext = Observed::SecretPlaintextRead { scope: "vendor".into() };
    assert_eq!(events.iter().filter(|e| **e == plaintext).count(), 1, "{events:?}");
    assert!(events.contains(&Observed::SecretDecrypted { scope: String::new(), kid: "k-2026".into() }));
    // The same, as Python names and labels its families.
    let metrics = app.render_metrics().unwrap();
    for sample in [
        r#"flechtwerk_keyring_keys_loaded{app="secrets",kid="k-2026"} 1.0"#,
        r#"flechtwerk_secret_decrypts_total{app="secrets",kid="k-2026",scope="vendor"} 2.0"#,
        r#"flechtwerk_secret_plaintext_reads_total{app="secrets",scope="vendor"} 1.0"#,
    ] {
        assert!(metrics.contains(sample), "{sample} not in:\n{metrics}");
    }

    // Nothing printed, no record written, no metric holds a secret.
    let logs = String::from_utf8_lossy(&captured().lock().unwrap().clone()).into_owned();
    assert!(logs.contains("secret value read as legacy plaintext"), "the SEC-13 warning was logged");
    let written: String = changelog
        .iter()
        .chain(&outputs)
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect();
    for (what, text) in [
        ("logs", logs.as_str()),
        ("records", written.as_str()),
        ("metrics", metrics.as_str()),
        ("keyring Debug", &format!("{keyring:?}")),
        ("events", &format!("{events:?}")),
    ] {
        for secret in [API_KEY, STATE_SECRET, KEY_B64] {
            assert!(!text.contains(secret), "{secret} is in the {what}");
        }
    }
    // The plaintext legacy value is on the topic in clear (that is what the migration fixes),
    // and in the forwarded config; it is never logged.
    assert!(!logs.contains("legacy-in-clear"));
    println!(
        "secret grep: {} log lines, {} records, the metrics: no plaintext, no key",
        logs.lines().count(),
        changelog.len() + outputs.len()
    );
}

/// SEC-40, N-11, INV-42, ERR-32: the scan of config topics reports every secret value —
/// ciphertext with its kid, plaintext, a corrupt token with its error — and every record that
/// does not decode (an undecodable key by Python's `repr` of its bytes), skips tombstones and
/// absent or null values, needs no key, and refuses a missing topic instead of reporting nothing.
#[tokio::test(flavor = "current_thread")]
async fn sec_40_n_11_scan_of_config_topics() {
    use flechtwerk::kafka::ConsumerConfig;
    use flechtwerk::{scan_config_topics, ScanEntry, ScanError};
    let kafka = LocalCluster::new();
    let admin = kafka.admin().unwrap();
    admin.create_topic(&NewTopic::new("vendors", 1).compacted()).await.unwrap();
    admin.create_topic(&NewTopic::new("partners", 2).compacted()).await.unwrap();
    let keyring = keyring();
    let sealed = with_keyring(&keyring, || Config::new().with(&VENDOR_KEY, API_KEY.to_owned()).unwrap());
    produce(&kafka, "vendors", "acme", sealed.encode().unwrap()).await;
    produce(&kafka, "vendors", "legacy", br#"{"api_key":"in clear","note":"x"}"#.to_vec()).await;
    produce(&kafka, "vendors", "corrupt", br#"{"api_key":"flenc:jwe:%%%.x.y.z.w"}"#.to_vec()).await;
    produce(&kafka, "vendors", "none", br#"{"api_key":null,"note":"x"}"#.to_vec()).await;
    produce(&kafka, "vendors", "deleted", b"{}".to_vec()).await;
    produce(&kafka, "vendors", "broken", b"{not json".to_vec()).await;
    let producer = kafka.producer(ProducerConfig::idempotent("seed-raw")).unwrap();
    producer.send(ProducerRecord::new("partners", b"\xff\xfe".to_vec(), b"{}x".to_vec())).await.unwrap().await.unwrap();
    producer.close().await;

    let mut consumer = kafka.consumer(ConsumerConfig::groupless("scanner")).unwrap();
    let found = scan_config_topics(consumer.as_mut(), &["vendors", "partners"], &[VENDOR_KEY.name(), NOTE.name()])
        .await
        .unwrap();
    let entry = |attribute: &str, error: Option<&str>, kid: Option<&str>, topic: &str, wire_key: &str| ScanEntry {
        attribute: attribute.into(),
        error: error.map(Into::into),
        kid: kid.map(Into::into),
        partition: 0,
        topic: topic.into(),
        wire_key: wire_key.into(),
    };
    let corrupt_error = found.iter().find(|e| e.wire_key == "corrupt").and_then(|e| e.error.clone());
    let broken_error = found.iter().find(|e| e.wire_key == "broken").and_then(|e| e.error.clone());
    let partner_error = found.iter().find(|e| e.topic == "partners").and_then(|e| e.error.clone());
    let partner_partition = found.iter().find(|e| e.topic == "partners").map(|e| e.partition).unwrap();
    assert!(corrupt_error.as_deref().is_some_and(|e| e.starts_with("malformed JWE header")), "{found:?}");
    assert!(broken_error.as_deref().is_some_and(|e| e.starts_with("not JSON")), "{found:?}");
    assert!(partner_error.as_deref().is_some_and(|e| e.starts_with("not UTF-8")), "{found:?}");
    let mut partner = entry("", partner_error.as_deref(), None, "partners", r"b'\xff\xfe'");
    partner.partition = partner_partition;
    assert_eq!(
        found,
        [
            entry("api_key", None, Some("k-2026"), "vendors", "acme"),
            entry("api_key", None, None, "vendors", "legacy"),
            entry("note", None, None, "vendors", "legacy"),
            entry("api_key", corrupt_error.as_deref(), None, "vendors", "corrupt"),
            entry("note", None, None, "vendors", "none"),
            entry("", broken_error.as_deref(), None, "vendors", "broken"),
            partner,
        ]
    );
    assert!(
        found[1].is_plaintext() && !found[0].is_plaintext() && !found[3].is_plaintext() && !found[5].is_plaintext()
    );
    for e in &found {
        assert!(!format!("{e:?}").contains(API_KEY));
    }
    let missing =
        scan_config_topics(consumer.as_mut(), &["vendors", "nowhere", "gone"], &["api_key"]).await.unwrap_err();
    assert!(matches!(&missing, ScanError::MissingTopics { topics } if topics == &["gone", "nowhere"]));
    assert_eq!(missing.to_string(), "cannot scan — config topic(s) not found: ['gone', 'nowhere']");
}
