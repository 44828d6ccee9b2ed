//! Connection security: TLS and SASL as typed settings ([`Security`], [`Secret`]), what this
//! build of librdkafka has compiled in, and the refusal slot that turns librdkafka's
//! authentication and handshake errors (which it only logs and retries) into a named error for
//! the calls waiting on that client.

use std::ffi::CStr;
use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::bindings as rdsys;
use rdkafka::error::RDKafkaErrorCode as Code;

use super::blocking;
use crate::kafka::{KafkaError, KafkaErrorKind, KafkaResult};

/// A password or private key. Its `Debug` and `Display` print `[redacted]`, so it can sit in
/// configuration structs that get logged; only [`expose`](Secret::expose) gives the text.
///
/// ```
/// use flechtwerk::kafka::rdkafka::Secret;
/// let password = Secret::new("hunter2");
/// assert_eq!(format!("{password} {password:?}"), "[redacted] [redacted]"); // safe to log
/// assert_eq!(password.expose(), "hunter2");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::Secret;
    /// // Typically read from a secret store or a mounted file by the application.
    /// let password = Secret::new(String::from("hunter2"));
    /// assert_eq!(password, Secret::from("hunter2"));
    /// ```
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret text (handed to librdkafka; never logged by this crate).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::Secret;
    /// assert_eq!(Secret::new("hunter2").expose().len(), 7);
    /// ```
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

/// A SASL mechanism with username and password.
///
/// ```
/// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
/// let security = Security::sasl_ssl(SaslMechanism::ScramSha256, "orders-app", Secret::new("pw"));
/// assert!(security.uses_tls());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// `PLAIN`: the password goes to the broker as is, so only ever over TLS
    /// ([`Security::sasl_ssl`]).
    Plain,
    /// `SCRAM-SHA-256`.
    ScramSha256,
    /// `SCRAM-SHA-512`.
    ScramSha512,
}

impl SaslMechanism {
    /// The name librdkafka and the broker use (`sasl.mechanism`).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::SaslMechanism;
    /// assert_eq!(SaslMechanism::ScramSha512.as_str(), "SCRAM-SHA-512");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Protocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Sasl {
    mechanism: SaslMechanism,
    username: String,
    password: Secret,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Trust {
    /// The system's trust store (librdkafka's default; `ssl.ca.location` unset).
    System,
    File(PathBuf),
    Pem(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ClientKey {
    Files { certificate: PathBuf, key: PathBuf, password: Option<Secret> },
    Pem { certificate: String, key: Secret, password: Option<Secret> },
}

/// How every client of an [`RdKafka`](super::RdKafka) connects: plaintext (the default), TLS, SASL over TLS, or
/// SASL in the clear. Built with the constructors, refined with the `with_*` methods, given to
/// [`RdKafka::with_security`](super::RdKafka::with_security).
///
/// ```
/// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
/// # fn main() -> Result<(), flechtwerk::kafka::KafkaError> {
/// # let password = String::from("pw");
/// let kafka = RdKafka::new("kafka-1:9094,kafka-2:9094").with_security(
///     Security::sasl_ssl(SaslMechanism::ScramSha512, "orders-app", Secret::new(password))
///         .with_ca_file("/etc/kafka/ca.pem"),
/// )?;
/// # let _ = kafka; Ok(()) }
/// ```
///
/// TLS always verifies the broker's certificate and host name (librdkafka's defaults
/// `enable.ssl.certificate.verification=true`, `ssl.endpoint.identification.algorithm=https`);
/// there is no switch here to turn either off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Security {
    protocol: Protocol,
    sasl: Option<Sasl>,
    trust: Trust,
    client_key: Option<ClientKey>,
}

impl Default for Security {
    fn default() -> Self {
        Security::plaintext()
    }
}

impl Security {
    /// No TLS, no authentication (`security.protocol=PLAINTEXT`).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// assert_eq!(Security::plaintext(), Security::default());
    /// assert!(!Security::plaintext().uses_tls());
    /// // CA certificates make no sense without TLS: refused when given to the adapter.
    /// assert!(RdKafka::new("127.0.0.1:9092").with_security(Security::plaintext().with_ca_file("/etc/ca.pem")).is_err());
    /// ```
    pub fn plaintext() -> Self {
        Security { protocol: Protocol::Plaintext, sasl: None, trust: Trust::System, client_key: None }
    }

    /// TLS without SASL (`SSL`): the broker is verified against the trusted CAs; add
    /// [`with_client_certificate`](Self::with_client_certificate) for mutual TLS.
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// let security = Security::ssl().with_ca_file("/etc/kafka/ca.pem");
    /// assert!(security.uses_tls());
    /// ```
    pub fn ssl() -> Self {
        Security { protocol: Protocol::Ssl, ..Security::plaintext() }
    }

    /// SASL over TLS (`SASL_SSL`), the production setting.
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// let security = Security::sasl_ssl(SaslMechanism::Plain, "orders-app", Secret::new("pw"));
    /// assert!(security.uses_tls());
    /// assert!(!format!("{security:?}").contains("pw")); // the password stays redacted
    /// ```
    pub fn sasl_ssl(mechanism: SaslMechanism, username: impl Into<String>, password: Secret) -> Self {
        Security {
            protocol: Protocol::SaslSsl,
            sasl: Some(Sasl { mechanism, username: username.into(), password }),
            ..Security::plaintext()
        }
    }

    /// SASL without TLS (`SASL_PLAINTEXT`): the records travel in the clear. SCRAM only: PLAIN
    /// would send the password in the clear, so it is refused here (use
    /// [`sasl_ssl`](Self::sasl_ssl)).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// let scram = Security::sasl_plaintext(SaslMechanism::ScramSha512, "orders-app", Secret::new("pw"));
    /// assert!(!scram.uses_tls());
    /// // PLAIN without TLS would send the password in the clear: refused.
    /// let plain = Security::sasl_plaintext(SaslMechanism::Plain, "orders-app", Secret::new("pw"));
    /// assert!(RdKafka::new("127.0.0.1:9092").with_security(plain).is_err());
    /// ```
    pub fn sasl_plaintext(mechanism: SaslMechanism, username: impl Into<String>, password: Secret) -> Self {
        Security {
            protocol: Protocol::SaslPlaintext,
            sasl: Some(Sasl { mechanism, username: username.into(), password }),
            ..Security::plaintext()
        }
    }

    /// Trusts the CA certificates in this PEM file instead of the system's trust store
    /// (`ssl.ca.location`).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// let private_ca = Security::ssl().with_ca_file("/etc/kafka/ca.pem");
    /// assert_ne!(private_ca, Security::ssl()); // instead of the system's trust store
    /// ```
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.trust = Trust::File(path.into());
        self
    }

    /// Trusts the CA certificates in this PEM text (`ssl.ca.pem`).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// let pem = "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n";
    /// let security = Security::ssl().with_ca_pem(pem);
    /// assert_ne!(security, Security::ssl().with_ca_file("/etc/kafka/ca.pem"));
    /// ```
    pub fn with_ca_pem(mut self, pem: impl Into<String>) -> Self {
        self.trust = Trust::Pem(pem.into());
        self
    }

    /// Presents a client certificate (mutual TLS): PEM files of the certificate and its private
    /// key, the key optionally encrypted with `key_password` (`ssl.certificate.location`,
    /// `ssl.key.location`, `ssl.key.password`).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// // Mutual TLS, the key encrypted with a password.
    /// let security = Security::ssl()
    ///     .with_ca_file("/etc/kafka/ca.pem")
    ///     .with_client_certificate("/etc/kafka/client.pem", "/etc/kafka/client.key", Some(Secret::new("key-pw")));
    /// assert!(!format!("{security:?}").contains("key-pw"));
    /// ```
    pub fn with_client_certificate(
        mut self,
        certificate: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
        key_password: Option<Secret>,
    ) -> Self {
        self.client_key =
            Some(ClientKey::Files { certificate: certificate.into(), key: key.into(), password: key_password });
        self
    }

    /// Like [`with_client_certificate`](Self::with_client_certificate), from PEM text
    /// (`ssl.certificate.pem`, `ssl.key.pem`).
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// let security = Security::ssl().with_client_certificate_pem(
    ///     "-----BEGIN CERTIFICATE-----\n...",
    ///     Secret::new("-----BEGIN PRIVATE KEY-----\n..."),
    ///     None,
    /// );
    /// assert!(!format!("{security:?}").contains("PRIVATE KEY")); // the key is a secret
    /// ```
    pub fn with_client_certificate_pem(
        mut self,
        certificate: impl Into<String>,
        key: Secret,
        key_password: Option<Secret>,
    ) -> Self {
        self.client_key = Some(ClientKey::Pem { certificate: certificate.into(), key, password: key_password });
        self
    }

    fn tls(&self) -> bool {
        matches!(self.protocol, Protocol::Ssl | Protocol::SaslSsl)
    }

    /// Whether clients connect over TLS.
    ///
    /// ```
    /// use flechtwerk::kafka::rdkafka::{RdKafka, SaslMechanism, Secret, Security};
    /// assert!(Security::ssl().uses_tls());
    /// assert!(!Security::sasl_plaintext(SaslMechanism::ScramSha256, "app", Secret::new("pw")).uses_tls());
    /// ```
    pub fn uses_tls(&self) -> bool {
        self.tls()
    }

    /// The librdkafka settings, or why this combination is refused.
    pub(super) fn settings(&self) -> KafkaResult<Vec<(&'static str, String)>> {
        let refuse = |why: String| Err(KafkaError::new(KafkaErrorKind::Other, "configure", why));
        let mut settings = vec![(
            "security.protocol",
            match self.protocol {
                Protocol::Plaintext => "plaintext",
                Protocol::Ssl => "ssl",
                Protocol::SaslPlaintext => "sasl_plaintext",
                Protocol::SaslSsl => "sasl_ssl",
            }
            .to_owned(),
        )];
        if !self.tls() && (self.trust != Trust::System || self.client_key.is_some()) {
            return refuse("CA or client certificates are given, but the security protocol uses no TLS".into());
        }
        if let Some(sasl) = &self.sasl {
            if self.protocol == Protocol::SaslPlaintext && sasl.mechanism == SaslMechanism::Plain {
                return refuse("SASL PLAIN without TLS would send the password in the clear: use sasl_ssl".into());
            }
            if sasl.username.is_empty() {
                return refuse("the SASL username is empty".into());
            }
            settings.push(("sasl.mechanism", sasl.mechanism.as_str().to_owned()));
            settings.push(("sasl.username", sasl.username.clone()));
            settings.push(("sasl.password", sasl.password.expose().to_owned()));
        }
        match &self.trust {
            Trust::System => {}
            Trust::File(path) => settings.push(("ssl.ca.location", path_setting(path)?)),
            Trust::Pem(pem) => settings.push(("ssl.ca.pem", pem.clone())),
        }
        match &self.client_key {
            None => {}
            Some(ClientKey::Files { certificate, key, password }) => {
                settings.push(("ssl.certificate.location", path_setting(certificate)?));
                settings.push(("ssl.key.location", path_setting(key)?));
                if let Some(password) = password {
                    settings.push(("ssl.key.password", password.expose().to_owned()));
                }
            }
            Some(ClientKey::Pem { certificate, key, password }) => {
                settings.push(("ssl.certificate.pem", certificate.clone()));
                settings.push(("ssl.key.pem", key.expose().to_owned()));
                if let Some(password) = password {
                    settings.push(("ssl.key.password", password.expose().to_owned()));
                }
            }
        }
        let features = builtin_features();
        let needed: &[&str] = match (&self.protocol, self.sasl.as_ref().map(|s| s.mechanism)) {
            (Protocol::Plaintext, _) => &[],
            (Protocol::Ssl, _) => &["ssl"],
            (_, Some(SaslMechanism::Plain)) => &["ssl", "sasl_plain"],
            (_, _) => &["ssl", "sasl_scram"],
        };
        if let Some(missing) = needed.iter().find(|f| !features.iter().any(|have| have == *f)) {
            return refuse(format!(
                "this build of librdkafka lacks `{missing}` (built in: {}): build flechtwerk with the `rdkafka` \
                 feature, not `rdkafka-plaintext`",
                features.join(",")
            ));
        }
        Ok(settings)
    }
}

fn path_setting(path: &std::path::Path) -> KafkaResult<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| {
        KafkaError::new(KafkaErrorKind::Other, "configure", format!("path {} is not UTF-8", path.display()))
    })
}

/// Whether `key` is a librdkafka setting about connection security: refused in
/// [`RdKafka::with_settings`] once a typed [`Security`] is given (and the other way round).
pub(super) fn is_security_setting(key: &str) -> bool {
    key == "security.protocol"
        || ["sasl.", "ssl.", "ssl_", "enable.ssl.", "enable.sasl."].iter().any(|prefix| key.starts_with(prefix))
}

/// Whether the value of `key` is (or may contain) a secret: never printed.
pub(super) fn is_secret_setting(key: &str) -> bool {
    key.contains("password")
        || key.contains("secret")
        || key.contains("jaas")
        || matches!(key, "ssl.key.pem" | "ssl_key" | "sasl.oauthbearer.config" | "ssl.keystore.location")
}

/// librdkafka's `builtin.features` of this build (`ssl`, `sasl_plain`, `sasl_scram`,
/// `sasl_oauthbearer`, `sasl_gssapi`, `zstd`, ...).
///
/// ```
/// use flechtwerk::kafka::rdkafka::builtin_features;
/// let features = builtin_features();
/// assert!(features.iter().any(|f| f == "zstd")); // always built in (the default compression)
/// // With the `rdkafka` feature (not `rdkafka-plaintext`) TLS and SCRAM are there too.
/// # #[cfg(feature = "rdkafka")]
/// assert!(features.iter().any(|f| f == "ssl") && features.iter().any(|f| f == "sasl_scram"));
/// ```
pub fn builtin_features() -> Vec<String> {
    use std::ffi::CString;
    // SAFETY: a fresh configuration object we own and destroy; the value is copied out of a
    // buffer of the size librdkafka reported.
    unsafe {
        let conf = rdsys::rd_kafka_conf_new();
        let name = CString::new("builtin.features").expect("no NUL");
        let mut size: usize = 0;
        rdsys::rd_kafka_conf_get(conf, name.as_ptr(), std::ptr::null_mut(), &mut size);
        let mut buffer = vec![0u8; size.max(1)];
        rdsys::rd_kafka_conf_get(conf, name.as_ptr(), buffer.as_mut_ptr().cast(), &mut size);
        rdsys::rd_kafka_conf_destroy(conf);
        let text = CStr::from_bytes_until_nul(&buffer).map(|c| c.to_string_lossy().into_owned()).unwrap_or_default();
        text.split(',').filter(|f| !f.is_empty()).map(str::to_owned).collect()
    }
}

/// Codes librdkafka reports when the cluster will not let a client in.
pub(super) fn is_authentication_code(code: Code) -> bool {
    matches!(code, Code::Authentication | Code::SSL | Code::SaslAuthenticationFailed | Code::UnsupportedSASLMechanism)
        || code == Code::IllegalSASLState
}

/// Broker codes of a missing ACL.
pub(super) fn is_authorization_code(code: Code) -> bool {
    matches!(
        code,
        Code::TopicAuthorizationFailed
            | Code::GroupAuthorizationFailed
            | Code::ClusterAuthorizationFailed
            | Code::TransactionalIdAuthorizationFailed
            | Code::DelegationTokenAuthorizationFailed
    )
}

/// librdkafka's own diagnosis of a plaintext client talking to a TLS listener. (It appends this
/// only on some paths; a connection the broker closes during the first request is logged as
/// `Disconnected: ... (after 0ms in state APIVERSION_QUERY)`, which [`refusal`] also reads.)
const PLAINTEXT_ON_TLS_HINT: &str = "incorrect security.protocol configuration";

/// What a refusal is based on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Evidence {
    /// An error code or message that says so (SASL, TLS).
    Certain,
    /// The broker closed the connection at the first request: a plaintext client on a TLS
    /// listener, unless the broker merely went away at that moment (so it counts only while
    /// nothing has succeeded on the client).
    Handshake,
}

/// The refusal an error (from the error callback, or a `FAIL` log line) means, if any. `tls`:
/// whether the client itself speaks TLS.
pub(super) fn refusal(code: Option<Code>, reason: &str, tls: bool) -> Option<(KafkaError, Evidence)> {
    let dropped_at_first_request = !tls
        && (reason.contains(PLAINTEXT_ON_TLS_HINT)
            || (reason.contains("Disconnected") && reason.contains("in state APIVERSION_QUERY")));
    // A TLS handshake the peer broke off (librdkafka reports `_TRANSPORT`, "SSL handshake failed:
    // Disconnected: ...") is a broker going away as often as a TLS client on a plaintext listener.
    let tls_failed = reason.contains("SSL handshake failed");
    let disconnected = reason.contains("Disconnected");
    let (what, evidence) = match code {
        Some(Code::SSL) => ("TLS handshake failed", Evidence::Certain),
        Some(c) if is_authentication_code(c) => ("SASL authentication failed", Evidence::Certain),
        _ if tls_failed && !disconnected => ("TLS handshake failed", Evidence::Certain),
        _ if tls_failed => (
            "the broker closed the connection during the TLS handshake: a TLS client on a plaintext \
             listener? (check the security protocol)",
            Evidence::Handshake,
        ),
        _ if reason.contains("SASL authentication error") => ("SASL authentication failed", Evidence::Certain),
        _ if dropped_at_first_request => (
            "the broker closed the connection at the first request: a plaintext client on a TLS listener? \
             (check the security protocol)",
            Evidence::Handshake,
        ),
        _ => return None,
    };
    // librdkafka's log lines start with the thread: `[thrd:sasl_ssl://host:9094/bootstrap]: `.
    let reason = match reason.strip_prefix("[thrd:").and_then(|rest| rest.split_once("]: ")) {
        Some((_, rest)) => rest,
        None => reason,
    };
    let error = KafkaError::new(KafkaErrorKind::Authentication, "connect", format!("{what}: {reason}"));
    let error = match code.map(|c| c as i32).filter(|c| *c > 0) {
        Some(code) => error.with_code(code),
        None => error,
    };
    Some((error, evidence))
}

/// Per client: the first refusal librdkafka reported. librdkafka only logs these and keeps
/// reconnecting, so calls that wait on the client race against this slot and fail with the
/// refusal as soon as it is filled (instead of running into their timeouts).
pub(super) struct Refusal {
    slot: tokio::sync::watch::Sender<Option<KafkaError>>,
    /// Set once a call through the broker succeeded: from then on a dropped connection during
    /// the first request is a broker going away, not a plaintext client on a TLS listener.
    connected: std::sync::atomic::AtomicBool,
    /// The brokers (`host:port`) that dropped a connection at the handshake so far.
    broken_off: std::sync::Mutex<std::collections::BTreeSet<String>>,
    /// How many brokers must have dropped one before that counts as a refusal: every bootstrap
    /// server. One broker dying as a fresh client reaches it looks exactly like a protocol
    /// mismatch, and so do two at once: the 60-minute nemesis had a broker restarting while a
    /// network fault reset the connections to another, and a client that met both ended as
    /// "refused" (4 replicas in 3,638 s). A mismatch shows on every broker.
    broken_off_needed: usize,
}

impl Refusal {
    /// The refusal slot of a client given `bootstrap_servers` (`host:port[,host:port...]`).
    pub(super) fn new(bootstrap_servers: &str) -> Self {
        let servers = bootstrap_servers.split(',').filter(|s| !s.trim().is_empty()).count();
        Refusal {
            slot: tokio::sync::watch::Sender::new(None),
            connected: false.into(),
            broken_off: Default::default(),
            broken_off_needed: servers.max(1),
        }
    }

    /// A call through the broker succeeded.
    pub(super) fn mark_connected(&self) {
        self.connected.store(true, Ordering::Relaxed);
    }

    /// Keeps the first refusal; later ones are ignored. A handshake that broke (no TLS or
    /// SASL error code, only librdkafka's hint) counts only before anything succeeded.
    pub(super) fn record(&self, client: &str, (error, evidence): (KafkaError, Evidence)) {
        if evidence == Evidence::Handshake && self.connected.load(Ordering::Relaxed) {
            tracing::debug!(client, %error, "connection dropped at the first request after earlier successes");
            return;
        }
        if evidence == Evidence::Handshake {
            let mut brokers = self.broken_off.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            brokers.insert(broker_address(&error.to_string()));
            if brokers.len() < self.broken_off_needed {
                tracing::info!(client, %error, "a broker dropped the connection at the handshake: waiting to see another do so");
                return;
            }
        }
        let error = error.with_context(format!("client {client}"));
        self.slot.send_if_modified(|slot| {
            if slot.is_some() {
                return false;
            }
            tracing::error!(client, %error, "the cluster refused the connection");
            *slot = Some(error);
            true
        });
    }

    /// The refusal, if there is one.
    pub(super) fn get(&self) -> Option<KafkaError> {
        self.slot.borrow().clone()
    }

    /// Resolves with the refusal once there is one.
    pub(super) fn wait(&self) -> impl std::future::Future<Output = KafkaError> + Send + 'static + use<> {
        let mut receiver = self.slot.subscribe();
        async move {
            loop {
                if let Some(refusal) = receiver.borrow_and_update().clone() {
                    return refusal;
                }
                if receiver.changed().await.is_err() {
                    // The sender lives as long as the client: gone, nothing can be refused.
                    return std::future::pending().await;
                }
            }
        }
    }
}

/// Per transactional producer: the partitions the broker refused to add to the current
/// transaction for lack of an ACL, as librdkafka logs them (facility `ADDPARTS`:
/// `Failed to add partition "orders-out" [0] to transaction: Broker: Topic authorization
/// failed`). Write missing on a topic whose Describe is granted ends up there and nowhere else:
/// librdkafka makes the transaction abortable and purges every record it holds, whose deliveries
/// then fail with `_PURGE_QUEUE`, and its transactional calls with an error that names no topic
/// (issue 34). The producer names the refused topic and the missing Write from here instead
/// ([`TxnRefusals::error`]). Emptied when a transaction begins.
#[derive(Debug, Default)]
pub(super) struct TxnRefusals {
    /// Refused topic → its refused partitions.
    refused: std::sync::Mutex<std::collections::BTreeMap<String, std::collections::BTreeSet<i32>>>,
    /// Woken at each refusal recorded ([`TxnRefusals::settle`]).
    recorded: tokio::sync::Notify,
}

impl TxnRefusals {
    /// Reads one of librdkafka's `ADDPARTS` log lines; keeps the partition if the broker
    /// refused it for lack of a topic ACL.
    pub(super) fn record(&self, message: &str) {
        if let Some((topic, partition)) = refused_partition(message) {
            let mut refused = self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            refused.entry(topic.to_owned()).or_default().insert(partition);
            drop(refused);
            self.recorded.notify_waiters();
        }
    }

    /// Waits, up to `bound`, until a refusal is recorded (at once if one is). For a delivery
    /// purged from the queue: the log line of the refusal that purged it left librdkafka's queue
    /// before the delivery report, but two threads serve that queue (the producer's poller, and
    /// `rd_kafka_flush` while the engine flushes), so the report can reach its future while the
    /// other thread is still about to record the line (on the test broker 3 of 11 runs of
    /// the output case named no topic without this wait).
    pub(super) async fn settle(&self, bound: std::time::Duration) {
        let recorded = self.recorded.notified();
        tokio::pin!(recorded);
        recorded.as_mut().enable();
        if !self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_empty() {
            return;
        }
        let _ = tokio::time::timeout(bound, recorded).await;
    }

    /// Forgets the refusals of the transaction before.
    pub(super) fn clear(&self) {
        self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// The refusal of the current transaction, if any, as the error of `operation` of the
    /// producer `client` (`transactional id …`): kind `Authorization`, the refused topics in
    /// the context, the partitions and the missing Write in the message.
    pub(super) fn error(&self, operation: &'static str, client: &str) -> Option<KafkaError> {
        let refused = self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if refused.is_empty() {
            return None;
        }
        let topics: Vec<&str> = refused.keys().map(String::as_str).collect();
        let partitions: Vec<String> =
            refused.iter().flat_map(|(topic, ps)| ps.iter().map(move |p| format!("{topic}/{p}"))).collect();
        let message = format!(
            "the broker refused to add {} to the transaction: Broker: Topic authorization failed (librdkafka \
             purged the transaction's records); not authorized: Write on the topic is missing",
            partitions.join(", ")
        );
        Some(
            KafkaError::new(KafkaErrorKind::Authorization, operation, message)
                .with_code(Code::TopicAuthorizationFailed as i32)
                .with_context(format!("{client}, {}", topics.join(", "))),
        )
    }
}

/// The topic and partition of librdkafka's `ADDPARTS` line when the broker refused that
/// partition for lack of a topic ACL (`[thrd:main]: sasl_ssl://host:9094/1: Failed to add
/// partition "orders-out" [0] to transaction: Broker: Topic authorization failed`). Other
/// reasons (`Operation not attempted`, for the partitions of the same request the broker did not
/// get to) are not refusals.
fn refused_partition(message: &str) -> Option<(&str, i32)> {
    const START: &str = "Failed to add partition \"";
    let rest = &message[message.find(START)? + START.len()..];
    let (topic, rest) = rest.split_once("\" [")?;
    let (partition, reason) = rest.split_once("] to transaction: ")?;
    let partition = partition.parse().ok()?;
    reason.contains("Topic authorization failed").then_some((topic, partition))
}

/// The broker a librdkafka connection message names, as `host:port`: `127.0.0.1:29093/bootstrap:
/// Disconnected ...`, `GroupCoordinator: 127.0.0.1:29093: Disconnected ...`,
/// `sasl_ssl://10.0.0.1:9094/1: SSL handshake failed ...` (the `/bootstrap` and `/<id>` names of
/// one broker, and its coordinator role, are one address). A message without one gives `""`.
fn broker_address(message: &str) -> String {
    message
        .split_whitespace()
        .find_map(|word| {
            let word = word.trim_end_matches(':');
            let word = word.rsplit_once("://").map_or(word, |(_, rest)| rest);
            let address = word.split('/').next()?;
            let (host, port) = address.rsplit_once(':')?;
            (!host.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
                .then(|| address.to_owned())
        })
        .unwrap_or_default()
}

/// Runs a blocking librdkafka call, failing early with the client's refusal if one arrives
/// first. The call itself watches the refusal too (see [`refused_here`]): its retries stop at
/// the refusal, and until the client has reached a broker each request waits at most
/// [`FIRST_CONTACT_SLICE`], so that a refused client's blocking thread ends within about that
/// long, not after its retry budget (a runtime waits for its blocking threads when it shuts
/// down: a stage refused by the cluster kept its process alive for a minute).
pub(super) async fn blocking_unless_refused<T: Send + 'static>(
    refusal: &Arc<Refusal>,
    operation: &'static str,
    call: impl FnOnce() -> KafkaResult<T> + Send + 'static,
) -> KafkaResult<T> {
    if let Some(refused) = refusal.get() {
        return Err(refused);
    }
    let refused = refusal.wait();
    let watched = Arc::clone(refusal);
    let result = tokio::select! {
        biased;
        result = blocking(operation, move || watching(watched, call)) => result,
        refused = refused => Err(refused),
    };
    if result.is_ok() {
        refusal.mark_connected();
    }
    result
}

/// How long one request of a client that has not yet reached a broker may wait inside
/// [`blocking_unless_refused`] before its retry loop looks at the refusal again.
pub(super) const FIRST_CONTACT_SLICE: Duration = Duration::from_secs(2);

thread_local! {
    /// The refusal the blocking call on this thread watches ([`blocking_unless_refused`]).
    static WATCHED: std::cell::RefCell<Option<Arc<Refusal>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `call` with `refusal` watched on this thread.
fn watching<T>(refusal: Arc<Refusal>, call: impl FnOnce() -> KafkaResult<T>) -> KafkaResult<T> {
    struct Unwatch;
    impl Drop for Unwatch {
        fn drop(&mut self) {
            WATCHED.with(|w| w.borrow_mut().take());
        }
    }
    WATCHED.with(|w| *w.borrow_mut() = Some(refusal));
    let _unwatch = Unwatch;
    call()
}

/// For the retry loops of blocking calls: the refusal of the client whose call runs on this
/// thread, if the cluster refused it.
pub(super) fn refused_here() -> Option<KafkaError> {
    WATCHED.with(|w| w.borrow().as_ref().and_then(|r| r.get()))
}

/// For the retry loops of blocking calls: how long one request may wait, `timeout` at most; a
/// client watched for a refusal that has not yet reached a broker waits at most
/// [`FIRST_CONTACT_SLICE`].
pub(super) fn request_slice(timeout: Duration) -> Duration {
    let first_contact = WATCHED.with(|w| w.borrow().as_ref().is_some_and(|r| !r.connected.load(Ordering::Relaxed)));
    if first_contact {
        timeout.min(FIRST_CONTACT_SLICE)
    } else {
        timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let secret = Secret::new("hunter2");
        assert_eq!(format!("{secret} {secret:?}"), "[redacted] [redacted]");
        let security = Security::sasl_ssl(SaslMechanism::ScramSha512, "app", secret).with_ca_file("/ca.pem");
        let printed = format!("{security:?}");
        assert!(!printed.contains("hunter2") && printed.contains("app"), "{printed}");
    }

    fn has(feature: &str) -> bool {
        builtin_features().iter().any(|f| f == feature)
    }

    #[test]
    fn settings_of_sasl_ssl() {
        let security =
            Security::sasl_ssl(SaslMechanism::ScramSha256, "app", Secret::new("pw")).with_ca_file("/etc/ca.pem");
        if !has("ssl") {
            // `rdkafka-plaintext`: refused, naming what is missing (the secure tests check that
            // the `rdkafka` feature has TLS).
            let refused = security.settings().unwrap_err().to_string();
            assert!(refused.contains("lacks `ssl`") && refused.contains("rdkafka-plaintext"), "{refused}");
            return;
        }
        let settings = security.settings().expect("this build has TLS and SASL");
        assert_eq!(
            settings,
            vec![
                ("security.protocol", "sasl_ssl".to_owned()),
                ("sasl.mechanism", "SCRAM-SHA-256".to_owned()),
                ("sasl.username", "app".to_owned()),
                ("sasl.password", "pw".to_owned()),
                ("ssl.ca.location", "/etc/ca.pem".to_owned()),
            ]
        );
    }

    #[test]
    fn misuse_is_refused() {
        let plain_in_clear = Security::sasl_plaintext(SaslMechanism::Plain, "app", Secret::new("pw"));
        assert!(plain_in_clear.settings().unwrap_err().to_string().contains("in the clear"));
        let ca_without_tls = Security::plaintext().with_ca_file("/ca.pem");
        assert!(ca_without_tls.settings().is_err());
        assert!(Security::sasl_ssl(SaslMechanism::Plain, "", Secret::new("pw")).settings().is_err());
    }

    #[test]
    fn security_and_secret_settings() {
        for key in ["security.protocol", "sasl.password", "ssl.ca.location", "enable.ssl.certificate.verification"] {
            assert!(is_security_setting(key), "{key}");
        }
        for key in ["socket.timeout.ms", "debug", "client.rack"] {
            assert!(!is_security_setting(key), "{key}");
        }
        for key in ["sasl.password", "ssl.key.password", "ssl.key.pem", "sasl.oauthbearer.client.secret"] {
            assert!(is_secret_setting(key), "{key}");
        }
        assert!(!is_secret_setting("sasl.username"));
    }

    #[test]
    fn refusals_from_librdkafka_errors() {
        let sasl = refusal(
            Some(Code::Authentication),
            "SASL authentication error: Authentication failed during authentication due to invalid credentials",
            true,
        )
        .expect("a refusal")
        .0;
        assert_eq!(sasl.kind(), KafkaErrorKind::Authentication);
        assert!(sasl.to_string().contains("SASL authentication failed"), "{sasl}");
        let tls =
            refusal(Some(Code::SSL), "SSL handshake failed: certificate verify failed", true).expect("a refusal").0;
        assert!(tls.to_string().contains("TLS handshake failed"), "{tls}");
        let line = "[thrd:127.0.0.1:9094/bootstrap]: 127.0.0.1:9094/bootstrap: Disconnected: connection closed by \
                    peer: receive 0 after POLLIN (after 0ms in state APIVERSION_QUERY)";
        let (plaintext, evidence) = refusal(None, line, false).expect("a refusal");
        assert_eq!(evidence, Evidence::Handshake);
        assert!(plaintext.to_string().contains("plaintext client on a TLS listener"), "{plaintext}");
        assert!(!plaintext.to_string().contains("[thrd:"), "{plaintext}");
        assert!(refusal(None, line, true).is_none(), "a TLS client is no plaintext client");
        assert!(refusal(Some(Code::BrokerTransportFailure), "Connection refused", false).is_none());
        assert!(refusal(Some(Code::AllBrokersDown), "1/1 brokers are down", false).is_none());

        // A broker that goes away during the TLS handshake: only before anything succeeded.
        let broken_off = "sasl_ssl://10.0.0.1:9094/1: SSL handshake failed: Disconnected: connection closed by peer: \
                          connecting to a PLAINTEXT broker listener? (after 3ms in state SSL_HANDSHAKE)";
        let (error, evidence) = refusal(Some(Code::BrokerTransportFailure), broken_off, true).expect("a refusal");
        assert_eq!(evidence, Evidence::Handshake, "{error}");
        assert!(error.to_string().contains("TLS client on a plaintext listener"), "{error}");

        let refused = Refusal::new("10.0.0.1:9094");
        refused.mark_connected();
        refused.record("c", refusal(None, broken_off, true).expect("a refusal"));
        refused.record("c", refusal(None, line, false).expect("a refusal"));
        assert!(refused.get().is_none(), "after a success, a dropped connection is a broker going away");
        refused.record("c", sasl_refusal());
        assert_eq!(refused.get().map(|e| e.kind()), Some(KafkaErrorKind::Authentication));
    }

    /// A broker SIGKILLed just as a fresh client of a cluster reaches it drops the connection at
    /// the first request, exactly as a TLS listener does to a plaintext client (the failover test
    /// met it), and so do two brokers faulted at once (the nemesis met a restart beside a network
    /// reset): with several bootstrap servers that counts only once every one of them does so.
    #[test]
    fn one_broker_dropping_the_handshake_is_no_refusal_of_a_cluster() {
        let dropped = |broker: &str| {
            let line = format!(
                "[thrd:{broker}/bootstrap]: {broker}/bootstrap: Disconnected: connection reset by peer (after 23ms in state APIVERSION_QUERY)"
            );
            refusal(None, &line, false).expect("a refusal")
        };
        let cluster = Refusal::new("127.0.0.1:29091,127.0.0.1:29092,127.0.0.1:29093");
        cluster.record("c", dropped("127.0.0.1:29093"));
        cluster.record("c", dropped("127.0.0.1:29093"));
        let coordinator = "GroupCoordinator: 127.0.0.1:29093: Disconnected: connection reset by peer (after 6ms in state APIVERSION_QUERY)";
        cluster.record("c", refusal(None, coordinator, false).expect("a refusal"));
        assert!(cluster.get().is_none(), "one broker going away, thrice, once as a coordinator");
        cluster.record("c", dropped("127.0.0.1:29091"));
        assert!(cluster.get().is_none(), "two brokers of three faulted at once");
        cluster.record("c", dropped("127.0.0.1:29092"));
        assert_eq!(cluster.get().map(|e| e.kind()), Some(KafkaErrorKind::Authentication), "every broker: a mismatch");

        let single = Refusal::new("127.0.0.1:9092");
        single.record("c", dropped("127.0.0.1:9092"));
        assert!(single.get().is_some(), "the only bootstrap server dropping it is the evidence there is");
        // Certain evidence never waits for a second broker.
        let certain = Refusal::new("a:1,b:2");
        certain.record("c", sasl_refusal());
        assert!(certain.get().is_some());
    }

    #[test]
    fn broker_addresses_of_librdkafka_messages() {
        assert_eq!(broker_address("127.0.0.1:29093/bootstrap: Disconnected"), "127.0.0.1:29093");
        assert_eq!(broker_address("connect failed: 127.0.0.1:29093/3: Disconnected"), "127.0.0.1:29093");
        assert_eq!(broker_address("sasl_ssl://10.0.0.1:9094/1: SSL handshake failed"), "10.0.0.1:9094");
        // A coordinator's connection names the broker without a slash (the nemesis met one
        // broker counted twice, as "" and as its address, and a refusal from one dying broker).
        assert_eq!(
            broker_address("GroupCoordinator: 127.0.0.1:29092: Disconnected: connection reset by peer"),
            "127.0.0.1:29092"
        );
        assert_eq!(broker_address("the broker closed the connection (check the protocol): x"), "");
        assert_eq!(broker_address("no broker named here"), "");
    }

    /// Issue 34: Write missing on a topic whose Describe is granted shows only in librdkafka's
    /// `ADDPARTS` log line (the format of librdkafka 2.12's `rdkafka_txnmgr.c`); the refusal
    /// names the topic, its partitions and the missing Write, and a new transaction forgets it.
    #[test]
    fn a_partition_refused_to_the_transaction_is_named() {
        let line = |topic: &str, partition: i32, reason: &str| {
            format!(
                "[thrd:main]: sasl_ssl://127.0.0.1:9094/1: Failed to add partition \"{topic}\" [{partition}] to \
                 transaction: {reason}"
            )
        };
        assert_eq!(refused_partition(&line("app-out", 3, "Broker: Topic authorization failed")), Some(("app-out", 3)));
        assert_eq!(refused_partition(&line("app-out", 1, "Broker: Operation not attempted")), None);
        assert_eq!(
            refused_partition("Failed to add partitions to transaction: Broker: Topic authorization failed"),
            None
        );

        let refusals = TxnRefusals::default();
        assert!(refusals.error("send", "transactional id app-0").is_none(), "nothing refused yet");
        refusals.record(&line("app-changelog", 1, "Broker: Topic authorization failed"));
        refusals.record(&line("app-out", 0, "Broker: Operation not attempted"));
        refusals.record(&line("app-changelog", 0, "Broker: Topic authorization failed"));
        let error = refusals.error("send", "transactional id app-0").expect("a refusal");
        assert_eq!(error.kind(), KafkaErrorKind::Authorization);
        assert_eq!(error.code(), Some(29));
        assert_eq!(error.context(), Some("transactional id app-0, app-changelog"));
        let text = error.to_string();
        assert!(text.contains("app-changelog/0, app-changelog/1"), "{text}");
        assert!(text.contains("Write on the topic is missing"), "{text}");
        assert!(!text.contains("app-out"), "only the refused topic is named: {text}");
        refusals.clear();
        assert!(refusals.error("commit_transaction", "transactional id app-0").is_none(), "a new transaction");
    }

    /// A purged delivery waits for the refusal another thread is about to record, and no longer
    /// than its bound when nothing is refused.
    #[tokio::test]
    async fn a_purged_delivery_waits_for_the_refusal_being_recorded() {
        let refusals = std::sync::Arc::new(TxnRefusals::default());
        let started = std::time::Instant::now();
        refusals.settle(std::time::Duration::from_millis(50)).await;
        assert!(started.elapsed() >= std::time::Duration::from_millis(50), "nothing refused: waits its bound");

        let recording = {
            let refusals = refusals.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                refusals.record(
                    "[thrd:main]: TxnCoordinator/1: Failed to add partition \"app-out\" [0] to transaction: Broker: \
                     Topic authorization failed",
                );
            })
        };
        let started = std::time::Instant::now();
        refusals.settle(std::time::Duration::from_secs(30)).await;
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "woken by the refusal");
        assert!(refusals.error("send", "transactional id app-0").is_some());
        recording.join().expect("the recording thread");
        let started = std::time::Instant::now();
        refusals.settle(std::time::Duration::from_secs(30)).await;
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "already refused: at once");
    }

    fn sasl_refusal() -> (KafkaError, Evidence) {
        refusal(Some(Code::Authentication), "SASL authentication error: invalid credentials", true).expect("refusal")
    }

    #[test]
    fn tls_comes_with_every_sasl_mechanism() {
        assert!(has("sasl_plain") && has("zstd") && has("gzip"), "{:?}", builtin_features());
        if has("ssl") {
            assert!(has("sasl_scram") && has("sasl_oauthbearer"), "{:?}", builtin_features());
        }
    }
}
