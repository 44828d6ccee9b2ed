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
//!   connection is down is discarded, so the message comes again.
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
    pub fn level(self) -> u8 {
        match self {
            QoS::AtMostOnce => 0,
            QoS::AtLeastOnce => 1,
        }
    }
}

/// The session a client opens: its identity and how long the broker keeps it while the client
/// is away (MQ-02).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The client id: the session's identity, distinct per instance and stable across restarts.
    pub client_id: String,
    /// The `Session Expiry Interval` sent in every CONNECT (whole seconds on the wire).
    pub session_expiry: Duration,
}

/// One received PUBLISH.
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
#[derive(Debug)]
pub struct EventReceiver(tokio::sync::mpsc::UnboundedReceiver<MqttEvent>);

/// The sending end of a client's events (for adapters).
#[derive(Clone, Debug)]
pub struct EventSender(tokio::sync::mpsc::UnboundedSender<MqttEvent>);

/// A new event channel (for adapters).
pub fn event_channel() -> (EventSender, EventReceiver) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    (EventSender(tx), EventReceiver(rx))
}

impl EventReceiver {
    /// The next event; `None` once the client has stopped.
    pub async fn recv(&mut self) -> Option<MqttEvent> {
        self.0.recv().await
    }
}

impl EventSender {
    /// Sends an event; `false` when nobody listens any more.
    pub fn send(&self, event: MqttEvent) -> bool {
        self.0.send(event).is_ok()
    }
}

/// A running client (see the [module](self) docs for the contract).
pub trait MqttClient: Send + Sync {
    /// Queues a SUBSCRIBE of `filter` (the wire form: a shared subscription is
    /// `$share/{group}/{filter}`).
    fn subscribe(&self, filter: &str, qos: QoS) -> Result<(), MqttError>;
    /// Queues an UNSUBSCRIBE of `filter` (the wire form).
    fn unsubscribe(&self, filter: &str) -> Result<(), MqttError>;
    /// Queues the PUBACK of `publish` (nothing for QoS 0). Discarded if the connection drops
    /// before it leaves: the broker then redelivers the message.
    fn ack(&self, publish: &Publish) -> Result<(), MqttError>;
    /// A plain DISCONNECT (never with a session expiry of 0: the session and its un-acknowledged
    /// messages stay for the next incarnation, MQ-03), then the client stops. The drop it causes
    /// is not reported as [`MqttEvent::Disconnected`].
    fn disconnect(&self) -> BoxFuture<'_, Result<(), MqttError>>;
}

/// An MQTT broker to connect to: the adapter, configured with the broker's address.
pub trait Mqtt: Send + Sync {
    /// Starts a client of `session`: it connects in the background and reports through the
    /// returned events (the first is the outcome of the first connection attempt).
    fn connect(&self, session: &Session) -> Result<(Box<dyn MqttClient>, EventReceiver), MqttError>;

    /// The broker, for logs and errors (`host:port`).
    fn broker(&self) -> String;
}

/// How an MQTT operation failed.
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
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MQTT {operation} failed: {message}")]
pub struct MqttError {
    kind: MqttErrorKind,
    operation: &'static str,
    message: String,
}

impl MqttError {
    /// An error of `kind` in `operation`.
    pub fn new(kind: MqttErrorKind, operation: &'static str, message: impl Into<String>) -> Self {
        MqttError { kind, operation, message: message.into() }
    }

    /// The classification.
    pub fn kind(&self) -> MqttErrorKind {
        self.kind
    }

    /// The operation (`subscribe`, `ack`, `connect`, …).
    pub fn operation(&self) -> &'static str {
        self.operation
    }
}

impl fmt::Display for QoS {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "QoS {}", self.level())
    }
}
