//! One MQTT session shared by per-filter views (Python's `MqttConnection` and
//! `MqttSubscription`): routing, the startup hold, reconciliation, acknowledgements and the
//! connection-error rules (MQ-04..07, MQ-10..17, MQ-20..23).
//!
//! The client's events are applied by a pump task ([`Connection::pump`]) under one lock, so a
//! message is in its view's buffer before the wakeup fires (append-then-set, MQ-12), and the
//! template's drain, acks and rollbacks see one consistent state.
//!
//! Two rules of acknowledgement, asserted where the acknowledgement leaves ([`Connection`]'s
//! `send_ack`) and where pending messages are acknowledged (`ack_all_pending`):
//!
//! - **only on the message's own connection.** Every message remembers the connection it
//!   arrived on. Acknowledging it on a later connection would name whatever the broker holds
//!   under its packet id by then (the id is reused once the message is acknowledged), so such an
//!   ack is never sent: the broker redelivers the message instead (a duplicate in Kafka, never a
//!   loss).
//! - **a relayed message only once the page carrying it committed.** A message handed to the
//!   producer waits in its view's open page (`in_page`) until the bridge reports the page's
//!   commit (`page_committed`); only then is it pending acknowledgement. An aborted page's
//!   messages return to the buffer (`roll_back`), never to the pending ones.

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::mqtt::{matches, EventReceiver, MqttClient, MqttEvent, Publish, QoS};
use crate::observer::Observer;
use crate::stage::mqtt::UNMATCHED;
use crate::stage::Wakeup;

/// A connection failure the bridge surfaces from `drain` (MQ-04, MQ-05).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConnectionError {
    /// "MQTT connect failed: <rc>" / "MQTT disconnected: <reason>" (ERR-13, ERR-14).
    pub(crate) message: String,
    /// A refused CONNACK surfaces at once; a drop only once it outlasts the reconnect grace.
    refused: bool,
    since: Instant,
}

impl std::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConnectionError {}

/// One filter's view: its buffer, the messages relayed into the open page, and those whose page
/// committed, not yet acknowledged.
#[derive(Debug, Default)]
struct View {
    items: VecDeque<Publish>,
    /// Handed to the producer in the page being written: not to be acknowledged (it may abort).
    in_page: Vec<Publish>,
    /// Their page committed: acknowledged at the next invocation, an unsubscribe or the stop.
    pending: Vec<Publish>,
}

#[derive(Debug, Default)]
struct State {
    /// Views in registration order: routing takes the first match (MQ-12).
    views: Vec<(String, View)>,
    /// QoS ≥ 1 messages no view matched yet (MQ-14).
    unrouted: Vec<Publish>,
    /// Filters whose view was removed: UNSUBSCRIBEd again after every CONNACK until subscribed
    /// anew. A resumed session keeps its subscriptions, and an UNSUBSCRIBE sent while the
    /// connection was down (or lost with it) never reached the broker.
    retired: BTreeSet<String>,
    /// The latched desired filters (`None` before the first reconciliation, MQ-15).
    desired: Option<BTreeSet<String>>,
    error: Option<ConnectionError>,
    /// The current connection's number (0 before the first CONNACK).
    connection: u64,
    connected: bool,
    /// The number of the connection whose CONNACK found no session (the broker created the
    /// session the current connection holds); 0 while every connection of this process resumed
    /// a session. Messages of earlier connections of that session that were not acknowledged
    /// come again; messages of connections before it were lost with an earlier session (a
    /// broker restart without persistence, an expiry, a clean start) and come never again.
    session_start: u64,
    /// The first connection attempt has an outcome.
    settled: bool,
    shutting_down: bool,
}

impl State {
    fn view(&self, filter: &str) -> Option<&View> {
        self.views.iter().find(|(f, _)| f == filter).map(|(_, v)| v)
    }

    fn view_mut(&mut self, filter: &str) -> Option<&mut View> {
        self.views.iter_mut().find(|(f, _)| f == filter).map(|(_, v)| v)
    }

    fn matches_desired(&self, topic: &str) -> bool {
        self.desired.as_ref().is_none_or(|desired| desired.iter().any(|f| matches(f, topic)))
    }

    /// Whether a message of an earlier connection would come again if left alone: it arrived
    /// on an earlier connection of the session the broker still holds.
    fn redelivered(&self, msg: &Publish) -> bool {
        msg.qos == QoS::AtLeastOnce && msg.connection != self.connection && msg.connection >= self.session_start
    }
}

/// What became of an acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acked {
    /// Queued for the broker (or QoS 0: nothing to send).
    Sent,
    /// The message arrived on an earlier connection: not acknowledged (the broker redelivers
    /// it, or it was lost with the old session).
    Stale,
    /// Could not be queued (no connection, a full queue): try again later.
    Failed,
}

/// The session and its views.
pub(crate) struct Connection {
    client: Box<dyn MqttClient>,
    state: Mutex<State>,
    group: String,
    qos: QoS,
    grace: Duration,
    observer: Arc<dyn Observer>,
    wakeup: Arc<Wakeup>,
    settled: Notify,
}

impl Connection {
    pub(crate) fn new(
        client: Box<dyn MqttClient>,
        group: String,
        qos: QoS,
        grace: Duration,
        observer: Arc<dyn Observer>,
        wakeup: Arc<Wakeup>,
    ) -> Self {
        Connection {
            client,
            state: Mutex::new(State::default()),
            group,
            qos,
            grace,
            observer,
            wakeup,
            settled: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The wire form of a filter (MQ-10): only SUBSCRIBE/UNSUBSCRIBE ever see it.
    fn shared(&self, filter: &str) -> String {
        format!("$share/{}/{filter}", self.group)
    }

    /// Applies the client's events until it stops.
    pub(crate) async fn pump(self: Arc<Self>, mut events: EventReceiver) {
        while let Some(event) = events.recv().await {
            self.on_event(event);
        }
    }

    /// Waits for the outcome of the first connection attempt: `Ok` once connected.
    pub(crate) async fn first_connection(&self) -> Result<(), ConnectionError> {
        loop {
            let notified = self.settled.notified();
            {
                let state = self.state();
                if state.connected {
                    return Ok(());
                }
                if state.settled {
                    return Err(state.error.clone().expect("a failed first attempt records its error"));
                }
            }
            notified.await;
        }
    }

    /// One event of the client (MQ-04..07, MQ-12..15).
    pub(crate) fn on_event(&self, event: MqttEvent) {
        let mut state = self.state();
        match event {
            MqttEvent::Connected { connection, session_present } => {
                // A successful (re)connect (MQ-06): the error is gone; pending acks of earlier
                // connections are stale (their packet ids name another message on this one, or
                // none). With the session resumed, the broker sends every message of it that it
                // holds un-acknowledged again, so held and buffered copies of those go too; a
                // message of a session the broker lost (no session present now, or present
                // but created after the message arrived) comes never again: it stays, to be
                // relayed (and never acknowledged).
                state.connection = connection;
                state.connected = true;
                if !session_present {
                    state.session_start = connection;
                }
                state.error = None;
                state.settled = true;
                self.observer.mqtt_connected();
                let unrouted = std::mem::take(&mut state.unrouted);
                state.unrouted =
                    unrouted.into_iter().filter(|m| m.qos == QoS::AtLeastOnce && !state.redelivered(m)).collect();
                for filter in &state.retired {
                    let shared = self.shared(filter);
                    if let Err(error) = self.client.unsubscribe(&shared) {
                        tracing::warn!(%error, filter = %shared, "MQTT unsubscribe of a retired filter not queued");
                    }
                }
                let State { views, connection, session_start, .. } = &mut *state;
                for (filter, view) in views.iter_mut() {
                    view.pending.clear();
                    view.in_page.clear();
                    view.items.retain(|m| {
                        m.qos == QoS::AtMostOnce || m.connection == *connection || m.connection < *session_start
                    });
                    // Mosquitto restores a `$share` subscription dead after its restart: always
                    // subscribe again.
                    self.send_subscribe(filter);
                }
                tracing::info!(connection, session_present, "MQTT connected");
                self.settled.notify_waiters();
            }
            MqttEvent::ConnectRefused { reason } => {
                state.connected = false;
                state.settled = true;
                state.error = Some(ConnectionError {
                    message: format!("MQTT connect failed: {reason}"),
                    refused: true,
                    since: Instant::now(),
                });
                self.settled.notify_waiters();
                self.wakeup.set();
            }
            MqttEvent::Disconnected { reason } => {
                state.connected = false;
                state.settled = true;
                if !state.shutting_down {
                    self.observer.mqtt_disconnected();
                    tracing::warn!(%reason, "MQTT disconnected");
                    let since = match &state.error {
                        Some(error) if !error.refused => error.since,
                        _ => Instant::now(),
                    };
                    state.error = Some(ConnectionError {
                        message: format!("MQTT disconnected: {reason}"),
                        refused: false,
                        since,
                    });
                    self.wakeup.set();
                }
                self.settled.notify_waiters();
            }
            MqttEvent::Publish(msg) => self.route(&mut state, msg),
        }
    }

    /// Inbound routing (MQ-12..15).
    fn route(&self, state: &mut State, msg: Publish) {
        if let Some((filter, view)) = state.views.iter_mut().find(|(f, _)| matches(f, &msg.topic)) {
            view.items.push_back(msg);
            self.observer.mqtt_message_in(filter);
            // Append, then set: the drain the wakeup causes sees the message (MQ-12).
            self.wakeup.set();
            return;
        }
        if msg.qos == QoS::AtMostOnce {
            tracing::warn!(topic = %msg.topic, "no subscription matches an MQTT QoS 0 message: dropped");
            return;
        }
        if !state.matches_desired(&msg.topic) {
            // After the first reconciliation: a straggler behind an UNSUBSCRIBE, or replay for a
            // filter an earlier deployment left in the session (MQ-15).
            tracing::warn!(topic = %msg.topic, "no active config declares a filter matching this MQTT message: dropped");
            self.ack_now(state, &msg);
            self.observer.mqtt_message_dropped(UNMATCHED, "stale");
            return;
        }
        // The startup window, or a desired filter whose view is not registered yet: held
        // un-acknowledged until its view appears (MQ-14).
        tracing::debug!(topic = %msg.topic, "no MQTT subscription matches yet: holding the message");
        state.unrouted.push(msg);
    }

    fn send_subscribe(&self, filter: &str) {
        let shared = self.shared(filter);
        tracing::info!(filter = %shared, qos = self.qos.level(), "MQTT subscribe");
        if let Err(error) = self.client.subscribe(&shared, self.qos) {
            tracing::warn!(%error, filter = %shared, "MQTT subscribe not queued");
        }
        // Removes a direct subscription a pre-shared deployment may have left in the session
        // (it would double-deliver); answered "no subscription existed" otherwise.
        if let Err(error) = self.client.unsubscribe(filter) {
            tracing::warn!(%error, %filter, "MQTT unsubscribe of the bare filter not queued");
        }
    }

    /// The view of `filter`, created (and subscribed, or deferred to the next connect) on first
    /// use; held messages matching it move to the front of its buffer in arrival order (MQ-11,
    /// MQ-14).
    pub(crate) fn subscribe(&self, filter: &str) {
        let mut state = self.state();
        if state.view(filter).is_some() {
            return;
        }
        state.retired.remove(filter);
        if state.connected {
            self.send_subscribe(filter);
        }
        let (held, rest): (Vec<Publish>, Vec<Publish>) =
            std::mem::take(&mut state.unrouted).into_iter().partition(|m| matches(filter, &m.topic));
        state.unrouted = rest;
        if !held.is_empty() {
            tracing::info!(%filter, held = held.len(), "routing held MQTT messages into a new subscription");
        }
        state.views.push((filter.to_owned(), View { items: held.into(), ..View::default() }));
    }

    /// Removes `filter`'s view (MQ-21): UNSUBSCRIBE, acknowledge what is pending (durable in
    /// Kafka at this quiescent point), acknowledge-and-drop what is buffered.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn unsubscribe(&self, filter: &str) {
        let mut state = self.state();
        self.unsubscribe_locked(&mut state, filter);
    }

    fn unsubscribe_locked(&self, state: &mut State, filter: &str) {
        let Some(at) = state.views.iter().position(|(f, _)| f == filter) else { return };
        let (_, view) = state.views.remove(at);
        state.retired.insert(filter.to_owned());
        let shared = self.shared(filter);
        tracing::info!(filter = %shared, "MQTT unsubscribe");
        if state.connected {
            if let Err(error) = self.client.unsubscribe(&shared) {
                tracing::warn!(%error, filter = %shared, "MQTT unsubscribe not queued");
            }
        }
        assert!(
            view.in_page.is_empty(),
            "filter {filter:?} unsubscribed while a page of it is open: its messages are not durable yet"
        );
        for msg in &view.pending {
            self.ack_now(state, msg);
        }
        if !view.items.is_empty() {
            tracing::warn!(%filter, dropped = view.items.len(), "dropping MQTT messages buffered for an unsubscribed filter");
        }
        for msg in &view.items {
            self.ack_now(state, msg);
            self.observer.mqtt_message_dropped(filter, "unsubscribed");
        }
        self.observer.mqtt_buffered(filter, 0);
    }

    /// Aligns the session with the active configs' filters (MQ-20): unsubscribes every other
    /// view, latches `desired`, acknowledges-and-drops held messages no desired filter matches.
    pub(crate) fn reconcile(&self, desired: BTreeSet<String>) {
        let mut state = self.state();
        let gone: Vec<String> = state.views.iter().map(|(f, _)| f.clone()).filter(|f| !desired.contains(f)).collect();
        for filter in gone {
            self.unsubscribe_locked(&mut state, &filter);
        }
        state.desired = Some(desired);
        let (keep, stale): (Vec<Publish>, Vec<Publish>) =
            std::mem::take(&mut state.unrouted).into_iter().partition(|m| state.matches_desired(&m.topic));
        state.unrouted = keep;
        for msg in stale {
            tracing::warn!(topic = %msg.topic, "dropping a held MQTT message no active config declares");
            self.ack_now(&state, &msg);
            self.observer.mqtt_message_dropped(UNMATCHED, "stale");
        }
    }

    /// Acknowledges a message now (MQ-16): a PUBACK for QoS 1, never for an earlier
    /// connection's message. Never fails loudly: the broker redelivers what it did not get.
    fn ack_now(&self, state: &State, msg: &Publish) -> Acked {
        if msg.qos == QoS::AtMostOnce {
            return Acked::Sent;
        }
        if msg.connection != state.connection {
            return Acked::Stale;
        }
        if !state.connected {
            return Acked::Failed;
        }
        self.send_ack(state, msg)
    }

    /// The one place an acknowledgement leaves for the broker.
    fn send_ack(&self, state: &State, msg: &Publish) -> Acked {
        assert_eq!(
            msg.connection, state.connection,
            "an ack for packet {} of connection {} on connection {}: its packet id names another message now",
            msg.packet_id, msg.connection, state.connection
        );
        match self.client.ack(msg) {
            Ok(()) => Acked::Sent,
            Err(error) => {
                tracing::warn!(%error, topic = %msg.topic, packet_id = msg.packet_id, "MQTT ack not queued (the broker will redeliver)");
                Acked::Failed
            }
        }
    }

    /// Acknowledges a message that needs no Kafka durability (a filtered or poison drop).
    pub(crate) fn ack(&self, msg: &Publish) -> Acked {
        let state = self.state();
        self.ack_now(&state, msg)
    }

    /// Acknowledges everything pending of `filter` (MQ-30): the previous invocation's messages,
    /// committed by the re-entry contract. What could not be queued stays pending; what arrived
    /// on an earlier connection is forgotten (the broker holds it again).
    pub(crate) fn ack_all_pending(&self, filter: &str) {
        let mut state = self.state();
        let Some(view) = state.view_mut(filter) else { return };
        assert!(
            view.in_page.is_empty(),
            "acknowledging {filter:?} while {} of its messages are in a page that has not committed",
            view.in_page.len()
        );
        let pending = std::mem::take(&mut view.pending);
        let mut kept = Vec::new();
        for msg in pending {
            if self.ack_now(&state, &msg) == Acked::Failed {
                kept.push(msg);
            }
        }
        if let Some(view) = state.view_mut(filter) {
            view.pending = kept;
        }
    }

    /// At a stop, once no poll runs any more: acknowledges what every view has pending, the
    /// last poll's messages, committed by the re-entry contract (MQ-38), so that the next
    /// holder of the session does not get them again. Buffered messages, never relayed, stay
    /// unacknowledged: the broker keeps them for the session.
    pub(crate) fn ack_all_pending_at_stop(&self) {
        let filters: Vec<String> = self.state().views.iter().map(|(filter, _)| filter.clone()).collect();
        for filter in filters {
            self.ack_all_pending(&filter);
        }
    }

    /// Takes up to `limit` buffered messages of `filter`, never waiting (MQ-17); the recorded
    /// connection error surfaces only once the buffer is empty (MQ-05), a dropped connection's
    /// only once it outlasts the reconnect grace. Also returns how many stay buffered.
    pub(crate) fn drain(&self, filter: &str, limit: usize) -> Result<(Vec<Publish>, usize), ConnectionError> {
        let mut state = self.state();
        let error = state.error.clone();
        let view = state.view_mut(filter).expect("the template subscribes before it drains");
        let take = limit.min(view.items.len());
        let batch: Vec<Publish> = view.items.drain(..take).collect();
        let left = view.items.len();
        if batch.is_empty() {
            if let Some(error) = error {
                if error.refused || error.since.elapsed() >= self.grace {
                    return Err(error);
                }
            }
        }
        Ok((batch, left))
    }

    /// Marks a forwarded message as in the open page: the producer accepted it (MQ-34). It is
    /// acknowledged only after [`Connection::page_committed`].
    pub(crate) fn mark_pending(&self, filter: &str, msg: Publish) {
        if let Some(view) = self.state().view_mut(filter) {
            view.in_page.push(msg);
        }
    }

    /// The page carrying `filter`'s relayed messages committed: they are durable in Kafka and
    /// may be acknowledged (at the next invocation, MQ-30).
    pub(crate) fn page_committed(&self, filter: &str) {
        if let Some(view) = self.state().view_mut(filter) {
            let committed = std::mem::take(&mut view.in_page);
            view.pending.extend(committed);
        }
    }

    /// Rolls an interrupted batch back (MQ-35): the forwarded messages are un-marked, and with
    /// the rest they return to the head of the buffer in arrival order — except messages of an
    /// earlier connection the broker sends again anyway.
    pub(crate) fn roll_back(&self, filter: &str, forwarded: &[Publish], rest: Vec<Publish>) {
        let mut state = self.state();
        let returning: Vec<Publish> = forwarded.iter().cloned().chain(rest).filter(|m| !state.redelivered(m)).collect();
        let Some(view) = state.view_mut(filter) else {
            // Unsubscribed meanwhile (a reconcile cannot run during a poll, but be safe): the
            // messages are not acknowledged, so the broker keeps them.
            return;
        };
        view.in_page.retain(|p| !forwarded.contains(p));
        for msg in returning.into_iter().rev() {
            view.items.push_front(msg);
        }
        tracing::info!(%filter, returned = forwarded.len(), "rolled back MQTT messages of an aborted page to the buffer");
    }

    /// A plain DISCONNECT (MQ-03); the drop it causes is not an error.
    pub(crate) async fn disconnect(&self) {
        self.state().shutting_down = true;
        if let Err(error) = self.client.disconnect().await {
            tracing::warn!(%error, "MQTT disconnect failed");
        }
    }
}

#[cfg(test)]
impl Connection {
    pub(crate) fn buffered(&self, filter: &str) -> Vec<Publish> {
        self.state().view(filter).map(|v| v.items.iter().cloned().collect()).unwrap_or_default()
    }

    pub(crate) fn pending(&self, filter: &str) -> Vec<Publish> {
        self.state().view(filter).map(|v| v.pending.clone()).unwrap_or_default()
    }

    pub(crate) fn in_page(&self, filter: &str) -> Vec<Publish> {
        self.state().view(filter).map(|v| v.in_page.clone()).unwrap_or_default()
    }

    pub(crate) fn unrouted(&self) -> Vec<Publish> {
        self.state().unrouted.clone()
    }

    pub(crate) fn desired(&self) -> Option<BTreeSet<String>> {
        self.state().desired.clone()
    }
}
