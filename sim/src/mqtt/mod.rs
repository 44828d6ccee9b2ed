//! A simulated MQTT v5 broker, and the client adapter of flechtwerk's MQTT port on it.
//!
//! The broker is a deterministic state machine behind a lock (time from the tokio clock, so it
//! runs on madsim's simulated time and on plain tokio alike); clients call into it directly
//! instead of over a socket, and it pushes their events into their event channels. What it
//! models is what the bridge's correctness depends on (measured on Mosquitto 2.0,
//! `shared/research/mqtt-prometheus.md`):
//!
//! - **Persistent sessions** keyed by client id, kept across disconnects and broker restarts
//!   until they expire (the port always connects with `clean_start` false). A reconnect to a
//!   kept session gets `session_present` and every message it had in flight again, in the
//!   order first sent, with the DUP flag and the same packet id; then its queue.
//! - **Sessions lost** as a real broker loses them: a restart without persistence
//!   ([`MqttBroker::stop_without_persistence`]) loses every session; a session whose client
//!   stays away longer than its expiry interval expires (an outage of the client's network,
//!   [`MqttBroker::cut`], a crashed or paused process); a client connecting with the same id
//!   and `clean_start` ([`MqttBroker::clean_start`]) discards it. What the session held in
//!   flight or queued is gone (recorded per message, [`PublishOutcome::lost_by`]), the next
//!   CONNECT finds no session (`session_present` false), and the new session numbers its
//!   packet ids from 1 again: a packet id of an earlier connection names another message, or
//!   none.
//! - **QoS 1 with manual acknowledgement**: a message stays in flight until its PUBACK arrives on
//!   the connection it was sent on; an ack sent on a connection that has since dropped is lost.
//! - **An in-flight window** per session (Mosquitto's `max_inflight_messages`, 20 by default):
//!   beyond it messages wait in the session's queue; the queue has a limit too
//!   (`max_queued_messages`), beyond which new messages are dropped (Mosquitto keeps the
//!   oldest) and counted.
//! - **Shared subscriptions** `$share/{group}/{filter}`: each message goes to one member
//!   session of the group, round robin over every member whose subscription is alive,
//!   connected or not (an offline member's session keeps absorbing its share, MQ-52). Plain
//!   subscriptions get a copy each.
//! - **Restarts keep sessions** (persistence on; without it, see above) and drop every
//!   connection; the broker is unreachable while it is down. Mosquitto's quirk is modelled: a restored `$share`
//!   subscription is dead — it receives nothing until subscribed again — and a message
//!   published meanwhile is lost.
//! - **Keepalive**: a connection whose client has not been heard of for 1.5 × the keepalive
//!   (a paused or killed process) is closed by the broker; a second connection of a client id
//!   takes the session over and closes the first.
//!
//! Not modelled (the bridge does not depend on them): QoS 2, retained messages, wills, topic
//! aliases, receive maximum negotiation, authentication. Packets are not lost individually (TCP
//! does not lose them): the fault knobs are connection drops, broker restarts (with or without
//! persistence), outages of one client's network, clean starts, session expiry, slow acks, and
//! an ack lost together with its connection.
//!
//! The module's files:
//! - `broker`: [`MqttBroker`], the broker's state machine (sessions, subscriptions, the in-flight
//!   window and queue, restarts, keepalive), and what it tells the checks.
//! - `client`: [`SimMqtt`], the port adapter: each client's connection loop, and how the
//!   network between a client and the broker (partitions, slow acks) reaches it.
//! - `wire`: what travels between the two: subscription filters in their wire form, PUBLISH
//!   packets.

mod broker;
mod client;
mod wire;

pub use broker::{AckHook, AckSeen, Held, LogHook, MqttBroker, PublishOutcome, SimBrokerConfig};
pub use client::{AckRoute, ClientFaults, Reachable, ReceiptLog, SendAckHook, SimMqtt, SubscriptionLog};
