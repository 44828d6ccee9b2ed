//! The production adapter of the MQTT port, on `rumqttc` (MQTT 5, feature `mqtt`).
//!
//! What it does about the measured pitfalls (`shared/research/mqtt-prometheus.md` in the
//! project's notes):
//!
//! - `clean_start = false` and the session expiry from the very first CONNECT (Mosquitto does
//!   not persist a session first created with `clean_start = true`).
//! - Manual acknowledgements: nothing is acknowledged until [`MqttClient::ack`].
//! - `EventLoop::poll` is not cancellation-safe, so the event loop runs in a task of its own and
//!   reports through the port's event channel; requests go through rumqttc's request queue.
//! - rumqttc reconnects inside `poll` at once after any error; the task waits with a backoff of
//!   its own (100 ms doubling to 5 s) before polling again.
//! - A DISCONNECT we asked for ends `poll` with an error as well: a shutdown flag keeps it from
//!   being reported as a failure.
//! - The receive maximum (how many QoS 1 messages the broker may have in flight to us) is
//!   raised to 1000 by default: the bridge acknowledges only after the Kafka commit, so a whole
//!   batch is in flight at once (Mosquitto's own `max_inflight_messages` must allow it too).
//! - Re-subscribing after every ConnAck (Mosquitto restores `$share` subscriptions dead after a
//!   restart) is the bridge's job: it sees every [`MqttEvent::Connected`].
//!
//! A limitation: an ack queued just before a connection drops may leave on the next
//! connection, naming a packet id of the previous one. Mosquitto redelivers a resumed session's
//! messages under their old packet ids, so it then acknowledges the same message; if that
//! message was already acknowledged and its id reused, or if the broker lost the session (a
//! restart without persistence, an expiry, a clean start: the new session numbers its ids from
//! 1 again), it acknowledges another message early (a loss only if the process then dies
//! before relaying it). The bridge never *asks* for such an ack (it drops acks of earlier
//! connections).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rumqttc::v5::mqttbytes::v5::{ConnectReturnCode, Packet, Publish as RawPublish};
use rumqttc::v5::mqttbytes::QoS as RawQoS;
use rumqttc::v5::{AsyncClient, ClientError, ConnectionError, Event, EventLoop, MqttOptions};

use super::{
    event_channel, EventReceiver, EventSender, Mqtt, MqttClient, MqttError, MqttErrorKind, MqttEvent, Publish, QoS,
    Session,
};

/// How long [`MqttClient::disconnect`] waits for the DISCONNECT to leave.
const DISCONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// An MQTT 5 broker reached through `rumqttc`.
///
/// ```no_run
/// // `no_run`: it needs an MQTT 5 broker (Mosquitto) listening on 127.0.0.1:1883.
/// use std::time::Duration;
/// use flechtwerk::mqtt::rumqttc::RumqttcBroker;
/// use flechtwerk::mqtt::{Mqtt, MqttEvent, Session};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let broker = RumqttcBroker::new("127.0.0.1", 1883).credentials("bridge", "secret");
/// assert_eq!(broker.broker(), "127.0.0.1:1883");
/// let session = Session { client_id: "bridge-pod-0".into(), session_expiry: Duration::from_secs(3600) };
/// let (client, mut events) = broker.connect(&session)?;
/// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
/// client.disconnect().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct RumqttcBroker {
    host: String,
    port: u16,
    credentials: Option<(String, String)>,
    keep_alive: Duration,
    receive_maximum: u16,
    request_queue: usize,
}

impl RumqttcBroker {
    /// The broker at `host:port`, with a keepalive of 30 s and a receive maximum of 1000.
    ///
    /// ```
    /// use flechtwerk::mqtt::Mqtt;
    /// use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    /// assert_eq!(RumqttcBroker::new("127.0.0.1", 1883).broker(), "127.0.0.1:1883");
    /// ```
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        RumqttcBroker {
            host: host.into(),
            port,
            credentials: None,
            keep_alive: Duration::from_secs(30),
            receive_maximum: 1000,
            request_queue: 65_536,
        }
    }

    /// Credentials (applied only when `username` is not empty, MQ-02).
    ///
    /// ```
    /// use flechtwerk::mqtt::Mqtt;
    /// use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    /// // An empty username means no credentials at all.
    /// let broker = RumqttcBroker::new("127.0.0.1", 1883).credentials("bridge", "secret");
    /// assert_eq!(broker.broker(), "127.0.0.1:1883"); // never shows the credentials
    /// ```
    pub fn credentials(mut self, username: impl Into<String>, password: impl Into<String>) -> Self {
        let username = username.into();
        self.credentials = if username.is_empty() { None } else { Some((username, password.into())) };
        self
    }

    /// The keepalive interval (default 30 s).
    ///
    /// ```
    /// use flechtwerk::mqtt::Mqtt;
    /// use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    /// use std::time::Duration;
    /// let broker = RumqttcBroker::new("127.0.0.1", 1883).keep_alive(Duration::from_secs(10));
    /// assert_eq!(broker.broker(), "127.0.0.1:1883");
    /// ```
    pub fn keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// How many QoS 1 messages the broker may have in flight to this client (the CONNECT's
    /// Receive Maximum, default 1000): at least the stage's `drain_limit`, or acknowledging after
    /// the commit stalls the stream.
    ///
    /// ```
    /// use flechtwerk::mqtt::Mqtt;
    /// use flechtwerk::mqtt::rumqttc::RumqttcBroker;
    /// // At least the stage's drain limit, so a whole drain can be in flight before its commit.
    /// let broker = RumqttcBroker::new("127.0.0.1", 1883).receive_maximum(2000);
    /// assert_eq!(broker.broker(), "127.0.0.1:1883");
    /// ```
    pub fn receive_maximum(mut self, maximum: u16) -> Self {
        self.receive_maximum = maximum.max(1);
        self
    }

    fn options(&self, session: &Session) -> MqttOptions {
        let mut options = MqttOptions::new(session.client_id.clone(), self.host.clone(), self.port);
        options.set_clean_start(false);
        // Whole seconds on the wire (MQ-02), saturating.
        options.set_session_expiry_interval(Some(u32::try_from(session.session_expiry.as_secs()).unwrap_or(u32::MAX)));
        options.set_manual_acks(true);
        options.set_keep_alive(self.keep_alive);
        options.set_receive_maximum(Some(self.receive_maximum));
        options.set_request_channel_capacity(self.request_queue);
        if let Some((username, password)) = &self.credentials {
            options.set_credentials(username.clone(), password.clone());
        }
        options
    }
}

impl std::fmt::Debug for RumqttcBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The password never reaches a log.
        f.debug_struct("RumqttcBroker")
            .field("broker", &self.broker())
            .field("username", &self.credentials.as_ref().map(|(u, _)| u))
            .field("keep_alive", &self.keep_alive)
            .field("receive_maximum", &self.receive_maximum)
            .finish_non_exhaustive()
    }
}

impl Mqtt for RumqttcBroker {
    fn connect(&self, session: &Session) -> Result<(Box<dyn MqttClient>, EventReceiver), MqttError> {
        if session.client_id.is_empty() {
            return Err(MqttError::new(MqttErrorKind::Invalid, "connect", "the client id is empty"));
        }
        let (client, eventloop) = AsyncClient::new(self.options(session), self.request_queue);
        let (events, receiver) = event_channel();
        let stopping = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(drive(eventloop, events, Arc::clone(&stopping)));
        Ok((Box::new(RumqttcClient { client, stopping, task: Mutex::new(Some(task)) }), receiver))
    }

    fn broker(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The event loop's task: every event of `poll` goes to the channel, in order.
async fn drive(mut eventloop: EventLoop, events: EventSender, stopping: Arc<AtomicBool>) {
    let mut connection = 0;
    let mut backoff = BACKOFF_MIN;
    loop {
        let event = eventloop.poll().await;
        if stopping.load(Ordering::SeqCst) {
            if event.is_err() {
                return;
            }
            continue;
        }
        let sent = match event {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                backoff = BACKOFF_MIN;
                if ack.code == ConnectReturnCode::Success {
                    connection += 1;
                    events.send(MqttEvent::Connected { connection, session_present: ack.session_present })
                } else {
                    events.send(MqttEvent::ConnectRefused { reason: reason_code(ack.code) })
                }
            }
            Ok(Event::Incoming(Packet::Publish(publish))) => {
                let qos = match publish.qos {
                    RawQoS::AtMostOnce => QoS::AtMostOnce,
                    // QoS 2 is not subscribed by the bridge; treat it as acknowledged-once.
                    _ => QoS::AtLeastOnce,
                };
                events.send(MqttEvent::Publish(Publish {
                    topic: String::from_utf8_lossy(&publish.topic).into_owned(),
                    payload: publish.payload,
                    qos,
                    packet_id: publish.pkid,
                    dup: publish.dup,
                    connection,
                }))
            }
            Ok(_) => true,
            Err(ConnectionError::ConnectionRefused(code)) => {
                let sent = events.send(MqttEvent::ConnectRefused { reason: reason_code(code) });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                sent
            }
            Err(error) => {
                let sent = events.send(MqttEvent::Disconnected { reason: error.to_string() });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                sent
            }
        };
        if !sent {
            // Nobody listens any more: the bridge is gone.
            return;
        }
    }
}

/// The CONNACK reason code (MQTT 5, section 3.2.2.2).
fn reason_code(code: ConnectReturnCode) -> u8 {
    use ConnectReturnCode as C;
    match code {
        C::Success => 0,
        C::RefusedProtocolVersion | C::UnsupportedProtocolVersion => 132,
        C::BadClientId | C::ClientIdentifierNotValid => 133,
        C::ServiceUnavailable | C::ServerUnavailable => 136,
        C::UnspecifiedError => 128,
        C::MalformedPacket => 129,
        C::ProtocolError => 130,
        C::ImplementationSpecificError => 131,
        C::BadUserNamePassword => 134,
        C::NotAuthorized => 135,
        C::ServerBusy => 137,
        C::Banned => 138,
        C::BadAuthenticationMethod => 140,
        C::TopicNameInvalid => 144,
        C::PacketTooLarge => 149,
        C::QuotaExceeded => 151,
        C::PayloadFormatInvalid => 153,
        C::RetainNotSupported => 154,
        C::QoSNotSupported => 155,
        C::UseAnotherServer => 156,
        C::ServerMoved => 157,
        C::ConnectionRateExceeded => 159,
    }
}

struct RumqttcClient {
    client: AsyncClient,
    stopping: Arc<AtomicBool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

fn queued(operation: &'static str, result: Result<(), ClientError>) -> Result<(), MqttError> {
    result.map_err(|error| match error {
        ClientError::TryRequest(_) => MqttError::new(MqttErrorKind::Busy, operation, error.to_string()),
        ClientError::Request(_) => MqttError::new(MqttErrorKind::Closed, operation, error.to_string()),
    })
}

fn raw_qos(qos: QoS) -> RawQoS {
    match qos {
        QoS::AtMostOnce => RawQoS::AtMostOnce,
        QoS::AtLeastOnce => RawQoS::AtLeastOnce,
    }
}

impl MqttClient for RumqttcClient {
    fn subscribe(&self, filter: &str, qos: QoS) -> Result<(), MqttError> {
        queued("subscribe", self.client.try_subscribe(filter, raw_qos(qos)))
    }

    fn unsubscribe(&self, filter: &str) -> Result<(), MqttError> {
        queued("unsubscribe", self.client.try_unsubscribe(filter))
    }

    fn ack(&self, publish: &Publish) -> Result<(), MqttError> {
        if publish.qos == QoS::AtMostOnce {
            return Ok(());
        }
        let mut raw = RawPublish::new(publish.topic.clone(), RawQoS::AtLeastOnce, bytes::Bytes::new(), None);
        raw.pkid = publish.packet_id;
        queued("ack", self.client.try_ack(&raw))
    }

    fn disconnect(&self) -> BoxFuture<'_, Result<(), MqttError>> {
        Box::pin(async move {
            // A plain DISCONNECT (MQ-03): the session and its un-acknowledged messages stay.
            self.stopping.store(true, Ordering::SeqCst);
            let sent = queued("disconnect", self.client.try_disconnect());
            let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(mut task) = task {
                if tokio::time::timeout(DISCONNECT_TIMEOUT, &mut task).await.is_err() {
                    tracing::warn!("the MQTT event loop did not end after DISCONNECT: stopping it");
                    task.abort();
                }
            }
            sent
        })
    }
}

impl Drop for RumqttcClient {
    fn drop(&mut self) {
        if let Some(task) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}
