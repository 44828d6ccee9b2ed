//! The MQTT port: what the MQTT bridge needs from an MQTT v5 client, and nothing of any client
//! library.
//!
//! Two adapters implement it: the production one on `rumqttc` (feature `mqtt`,
//! `rumqttc::RumqttcBroker`) and the simulated broker of the `flechtwerk-sim` crate
//! (madsim, or in-process). The bridge's logic (`stage::mqtt`) runs unchanged on both.
//!
//! The contract an adapter keeps:
//!
//! - **One persistent session.** [`Mqtt::connect`] starts a client that connects with
//!   `clean_start = false` and the session's expiry interval from the very first CONNECT (a
//!   session first created with `clean_start = true` is not persisted by Mosquitto), and keeps
//!   the connection: after a drop it reconnects by itself, with a backoff of its own, until
//!   [`MqttClient::disconnect`].
//! - **Events in order**, on one channel: every successful CONNACK as [`MqttEvent::Connected`]
//!   (numbered: the `connection` of every later [`Publish`] until the next one), a refused
//!   CONNACK as [`MqttEvent::ConnectRefused`], every unexpected drop once as
//!   [`MqttEvent::Disconnected`] (a disconnect the caller asked for is not reported), every
//!   PUBLISH as [`MqttEvent::Publish`]. Receiving is cancellation-safe.
//! - **Manual acknowledgements.** Nothing is acknowledged on receipt: a QoS 1 message stays in
//!   flight at the broker until [`MqttClient::ack`], and is redelivered (with the same packet id
//!   and the DUP flag) after a reconnect to a resumed session. An ack queued while the
//!   connection is down is discarded, so the message comes again. A session the broker lost (a
//!   restart without persistence, an expiry, a clean start under the same client id) is not
//!   resumed: the CONNACK says so (`session_present` false), its messages never come again, and
//!   the new session's packet ids start over, so an ack names a packet id only on the
//!   connection its message arrived on ([`Publish::connection`]).
//! - **Subscriptions are the caller's.** A resumed session may keep its subscriptions, but
//!   Mosquitto restores a `$share` subscription dead after a broker restart: the caller
//!   re-subscribes after every `Connected`.
//! - Requests ([`subscribe`](MqttClient::subscribe), [`unsubscribe`](MqttClient::unsubscribe),
//!   [`ack`](MqttClient::ack)) never block: they are queued for the connection, and an error
//!   means the request was not queued.

#[cfg(all(feature = "mqtt", not(madsim)))]
pub mod rumqttc;
mod topic;

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

pub use topic::{matches, validate_filter};

/// Quality of service of a subscription or a message (QoS 2 is not used by the bridge).
///
/// ```
/// use flechtwerk::mqtt::QoS;
/// assert_eq!(QoS::default(), QoS::AtLeastOnce); // what the bridge needs: redelivered until acked
/// assert_eq!(QoS::AtMostOnce.to_string(), "QoS 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum QoS {
    /// At most once: no acknowledgement, no redelivery.
    AtMostOnce,
    /// At least once: acknowledged by PUBACK, redelivered until then.
    #[default]
    AtLeastOnce,
}

impl QoS {
    /// The wire value (0 or 1).
    ///
    /// ```
    /// use flechtwerk::mqtt::QoS;
    /// assert_eq!([QoS::AtMostOnce.level(), QoS::AtLeastOnce.level()], [0, 1]);
    /// ```
    pub fn level(self) -> u8 {
        match self {
            QoS::AtMostOnce => 0,
            QoS::AtLeastOnce => 1,
        }
    }
}

/// The session a client opens: its identity and how long the broker keeps it while the client
/// is away (MQ-02).
///
/// ```
/// use std::time::Duration;
/// use flechtwerk::mqtt::Session;
/// // One per instance: the broker keeps its un-acknowledged messages for an hour while it is away.
/// let session = Session { client_id: "bridge-pod-0".into(), session_expiry: Duration::from_secs(3600) };
/// assert_eq!(session.session_expiry.as_secs(), 3600);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The client id: the session's identity, distinct per instance and stable across restarts.
    pub client_id: String,
    /// The `Session Expiry Interval` sent in every CONNECT (whole seconds on the wire).
    pub session_expiry: Duration,
}

/// One received PUBLISH.
///
/// ```
/// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
/// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
/// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
/// let (client, mut events) = mqtt.connect(&session)?;
/// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
/// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
/// broker.publish("site/7/readings", r#"{"v":1}"#); // a device publishes
/// let Some(MqttEvent::Publish(publish)) = events.recv().await else { panic!("a message") };
/// assert_eq!((publish.topic.as_str(), publish.qos, publish.dup), ("site/7/readings", QoS::AtLeastOnce, false));
/// assert_eq!(publish.connection, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    /// The concrete topic it was published to.
    pub topic: String,
    /// The payload, as it arrived.
    pub payload: Bytes,
    /// Its QoS (the lower of the publisher's and the subscription's).
    pub qos: QoS,
    /// Its packet id (0 for QoS 0): what the acknowledgement names.
    pub packet_id: u16,
    /// Redelivered after a reconnect (the DUP flag).
    pub dup: bool,
    /// The connection it arrived on (the number of its [`MqttEvent::Connected`]): an ack on a
    /// later connection would name whatever the broker holds under that packet id by then.
    pub connection: u64,
}

/// What a client reports, in order.
///
/// ```
/// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
/// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
/// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
/// let (client, mut events) = mqtt.connect(&session)?;
/// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
/// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
/// broker.publish("site/7/readings", r#"{"v":1}"#); // a device publishes
/// let Some(MqttEvent::Publish(publish)) = events.recv().await else { panic!("a message") };
/// assert_eq!(&publish.payload[..], br#"{"v":1}"#);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MqttEvent {
    /// A successful CONNACK: connection number `connection` (1, 2, … per client).
    Connected {
        /// The connection's number.
        connection: u64,
        /// The broker resumed the session (its subscriptions and un-acknowledged messages).
        session_present: bool,
    },
    /// A CONNACK with a failure reason code: the broker refused the session (credentials, a
    /// malformed client id, …). The client keeps retrying with its backoff.
    ConnectRefused {
        /// The CONNACK reason code.
        reason: u8,
    },
    /// The connection dropped without the caller asking (a network error, the broker going
    /// away, a DISCONNECT from the broker). The client reconnects with its backoff.
    Disconnected {
        /// Why, as the client saw it (a reason code or an I/O error).
        reason: String,
    },
    /// A received message.
    Publish(Publish),
}

/// The receiving end of a client's events. [`recv`](Self::recv) is cancellation-safe.
///
/// ```
/// use flechtwerk::mqtt::{event_channel, MqttEvent};
/// # futures::executor::block_on(async {
/// let (sender, mut receiver) = event_channel();
/// sender.send(MqttEvent::Disconnected { reason: "keep-alive timeout".into() });
/// drop(sender); // the client stopped
/// assert!(matches!(receiver.recv().await, Some(MqttEvent::Disconnected { .. })));
/// assert_eq!(receiver.recv().await, None);
/// # });
/// ```
#[derive(Debug)]
pub struct EventReceiver(tokio::sync::mpsc::UnboundedReceiver<MqttEvent>);

/// The sending end of a client's events (for adapters).
///
/// ```
/// use flechtwerk::mqtt::{event_channel, MqttEvent};
/// let (sender, receiver) = event_channel();
/// assert!(sender.send(MqttEvent::ConnectRefused { reason: 0x87 })); // an adapter reports a CONNACK
/// drop(receiver);
/// assert!(!sender.send(MqttEvent::ConnectRefused { reason: 0x87 })); // nobody listens any more
/// ```
#[derive(Clone, Debug)]
pub struct EventSender(tokio::sync::mpsc::UnboundedSender<MqttEvent>);

/// A new event channel (for adapters).
///
/// ```
/// use flechtwerk::mqtt::{event_channel, MqttEvent};
/// # futures::executor::block_on(async {
/// // An adapter's connection loop keeps the sender; connect returns the receiver.
/// let (events, mut receiver) = event_channel();
/// events.send(MqttEvent::Connected { connection: 1, session_present: false });
/// assert_eq!(receiver.recv().await, Some(MqttEvent::Connected { connection: 1, session_present: false }));
/// # });
/// ```
pub fn event_channel() -> (EventSender, EventReceiver) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (EventSender(tx), EventReceiver(rx))
}

impl EventReceiver {
    /// The next event; `None` once the client has stopped.
    ///
    /// ```
    /// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
    /// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
    /// let (client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
    /// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
    /// broker.publish("site/7/readings", r#"{"v":1}"#); // a device publishes
    /// let Some(MqttEvent::Publish(publish)) = events.recv().await else { panic!("a message") };
    /// assert_eq!(publish.packet_id, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn recv(&mut self) -> Option<MqttEvent> {
        self.0.recv().await
    }
}

impl EventSender {
    /// Sends an event; `false` when nobody listens any more.
    ///
    /// ```
    /// use flechtwerk::mqtt::{event_channel, MqttEvent};
    /// let (sender, _receiver) = event_channel();
    /// assert!(sender.send(MqttEvent::Connected { connection: 2, session_present: true }));
    /// ```
    pub fn send(&self, event: MqttEvent) -> bool {
        self.0.send(event).is_ok()
    }
}

/// A running client (see the [module](self) docs for the contract).
///
/// ```
/// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
/// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
/// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
/// let (client, mut events) = mqtt.connect(&session)?;
/// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
/// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
/// broker.publish("site/7/readings", r#"{"v":1}"#); // a device publishes
/// let Some(MqttEvent::Publish(publish)) = events.recv().await else { panic!("a message") };
/// client.ack(&publish)?; // after Kafka has it
/// client.disconnect().await?;
/// # Ok(())
/// # }
/// ```
pub trait MqttClient: Send + Sync {
    /// Queues a SUBSCRIBE of `filter` (the wire form: a shared subscription is
    /// `$share/{group}/{filter}`).
    ///
    /// ```
    /// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
    /// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
    /// let (client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
    /// client.subscribe("$share/bridge/site/+/readings", QoS::AtLeastOnce)?; // a shared subscription
    /// assert_eq!(broker.subscriptions("bridge-0").unwrap(), [(Some("bridge".into()), "site/+/readings".into())]);
    /// # Ok(())
    /// # }
    /// ```
    fn subscribe(&self, filter: &str, qos: QoS) -> Result<(), MqttError>;
    /// Queues an UNSUBSCRIBE of `filter` (the wire form).
    ///
    /// ```
    /// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
    /// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
    /// let (client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
    /// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
    /// client.unsubscribe("site/+/readings")?;
    /// assert_eq!(broker.subscriptions("bridge-0").unwrap(), []);
    /// # Ok(())
    /// # }
    /// ```
    fn unsubscribe(&self, filter: &str) -> Result<(), MqttError>;
    /// Queues the PUBACK of `publish` (nothing for QoS 0). Discarded if the connection drops
    /// before it leaves: the broker then redelivers the message.
    ///
    /// ```
    /// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
    /// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
    /// let (client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
    /// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
    /// broker.publish("site/7/readings", r#"{"v":1}"#); // a device publishes
    /// let Some(MqttEvent::Publish(publish)) = events.recv().await else { panic!("a message") };
    /// assert_eq!(broker.held("bridge-0"), 1); // in flight until acknowledged
    /// client.ack(&publish)?;
    /// assert_eq!(broker.held("bridge-0"), 0);
    /// # Ok(())
    /// # }
    /// ```
    fn ack(&self, publish: &Publish) -> Result<(), MqttError>;
    /// A plain DISCONNECT (never with a session expiry of 0: the session and its un-acknowledged
    /// messages stay for the next incarnation, MQ-03), then the client stops. The drop it causes
    /// is not reported as [`MqttEvent::Disconnected`].
    ///
    /// ```
    /// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
    /// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
    /// let (client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
    /// client.subscribe("site/+/readings", QoS::AtLeastOnce)?;
    /// broker.publish("site/7/readings", r#"{"v":1}"#); // a device publishes
    /// let Some(MqttEvent::Publish(publish)) = events.recv().await else { panic!("a message") };
    /// client.disconnect().await?; // without the ack: the session keeps the message
    /// assert_eq!(broker.held("bridge-0"), 1);
    /// assert!(client.disconnect().await.is_err()); // stopped already
    /// # Ok(())
    /// # }
    /// ```
    fn disconnect(&self) -> BoxFuture<'_, Result<(), MqttError>>;
}

/// An MQTT broker to connect to: the adapter, configured with the broker's address.
///
/// ```
/// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
/// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
/// // The bridge is given an `Mqtt` (here the simulated broker's adapter) and opens its session.
/// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
/// let (client, mut events) = mqtt.connect(&session)?;
/// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
/// client.disconnect().await?;
/// # Ok(())
/// # }
/// ```
pub trait Mqtt: Send + Sync {
    /// Starts a client of `session`: it connects in the background and reports through the
    /// returned events (the first is the outcome of the first connection attempt).
    ///
    /// ```
    /// use flechtwerk::mqtt::{Mqtt, MqttEvent, QoS, Session};
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker.clone(), Default::default(), Arc::new(|_| 0));
    /// let session = Session { client_id: "bridge-0".into(), session_expiry: Duration::from_secs(3600) };
    /// let (client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { connection: 1, .. })));
    /// client.disconnect().await?;
    /// // The next incarnation resumes the session.
    /// let (_client, mut events) = mqtt.connect(&session)?;
    /// assert!(matches!(events.recv().await, Some(MqttEvent::Connected { session_present: true, .. })));
    /// # Ok(())
    /// # }
    /// ```
    fn connect(&self, session: &Session) -> Result<(Box<dyn MqttClient>, EventReceiver), MqttError>;

    /// The broker, for logs and errors (`host:port`).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use flechtwerk::mqtt::Mqtt;
    /// # let broker = flechtwerk_sim::mqtt::MqttBroker::new(Default::default());
    /// # let mqtt = flechtwerk_sim::mqtt::SimMqtt::new(broker, Default::default(), Arc::new(|_| 0));
    /// assert!(!mqtt.broker().is_empty()); // for logs: `host:port` for a real broker
    /// ```
    fn broker(&self) -> String;
}

/// How an MQTT operation failed.
///
/// ```
/// use flechtwerk::mqtt::{MqttError, MqttErrorKind};
/// let error = MqttError::new(MqttErrorKind::Busy, "ack", "request queue full");
/// // Busy is worth a retry; Closed and Invalid are not.
/// assert!(matches!(error.kind(), MqttErrorKind::Busy));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MqttErrorKind {
    /// The client is stopped or its request queue is closed.
    Closed,
    /// The request queue is full (try again after the client has caught up).
    Busy,
    /// The settings are unusable (an invalid client id, filter or option).
    Invalid,
    /// The broker could not be reached or refused the connection.
    Connection,
}

/// A failed MQTT operation.
///
/// ```
/// use flechtwerk::mqtt::{MqttError, MqttErrorKind};
/// let error = MqttError::new(MqttErrorKind::Closed, "subscribe", "client stopped");
/// assert_eq!(error.to_string(), "MQTT subscribe failed: client stopped");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MQTT {operation} failed: {message}")]
pub struct MqttError {
    kind: MqttErrorKind,
    operation: &'static str,
    message: String,
}

impl MqttError {
    /// An error of `kind` in `operation`.
    ///
    /// ```
    /// use flechtwerk::mqtt::{MqttError, MqttErrorKind};
    /// // An adapter maps its client library's failures onto the port's kinds.
    /// let error = MqttError::new(MqttErrorKind::Invalid, "connect", "client id too long");
    /// assert_eq!((error.kind(), error.operation()), (MqttErrorKind::Invalid, "connect"));
    /// ```
    pub fn new(kind: MqttErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        MqttError { kind, operation, message: message.into() }
    }

    /// The classification.
    ///
    /// ```
    /// use flechtwerk::mqtt::{MqttError, MqttErrorKind};
    /// assert_eq!(MqttError::new(MqttErrorKind::Connection, "connect", "refused").kind(), MqttErrorKind::Connection);
    /// ```
    pub fn kind(&self) -> MqttErrorKind {
        self.kind
    }

    /// The operation (`subscribe`, `ack`, `connect`, …).
    ///
    /// ```
    /// use flechtwerk::mqtt::{MqttError, MqttErrorKind};
    /// assert_eq!(MqttError::new(MqttErrorKind::Closed, "ack", "stopped").operation(), "ack");
    /// ```
    pub fn operation(&self) -> &'static str {
        self.operation
    }
}

impl fmt::Display for QoS {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QoS {}", self.level())
    }
}
