//! The bridge as the engine runs it: an [`Extractor`] around the user's [`MqttExtractor`], with
//! the relay template as its poll (MQ-30..37) and the reconciliation as its
//! `on_active_configs` (MQ-22).

mod connection;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use self::connection::{Acked, Connection};
use crate::engine::records::panic_error;
use crate::error::{BoxError, Error};
use crate::mqtt::{Publish, Session};
use crate::observer::Observer;
use crate::record::{Config, Event, State};
use crate::stage::mqtt::{MqttBrokerConfig, MqttExtractor, TOPIC};
use crate::stage::{EnrichConfig, Extractor, Page, Wakeup};
use crate::wire::{InvalidMessageAction, InvalidMessageError};

/// How long the setup waits for the first connection's outcome.
const FIRST_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The bridge stage as the engine runs it.
pub(crate) struct Bridge<S> {
    stage: S,
    config: MqttBrokerConfig,
    client_id: String,
    group: String,
    observer: Arc<dyn Observer>,
    wakeup: Arc<Wakeup>,
    connection: Mutex<Option<Running>>,
}

struct Running {
    connection: Arc<Connection>,
    pump: tokio::task::JoinHandle<()>,
}

impl<S: MqttExtractor> Bridge<S> {
    /// The bridge of `stage` for instance `client_id` in share group `group` (the application
    /// id). Checks what the Python stage checks on entering (MQ-25, ERR-11, ERR-12).
    pub(crate) fn new(
        stage: S,
        config: MqttBrokerConfig,
        client_id: String,
        group: String,
        observer: Arc<dyn Observer>,
    ) -> Result<Self, Error> {
        if client_id.is_empty() {
            return Err(Error::Invalid(
                "no MQTT client_id configured: the persistent session needs a stable identity, unique per instance"
                    .into(),
            ));
        }
        if group.is_empty() || group.contains(['/', '+', '#']) {
            return Err(Error::Invalid(format!(
                "MQTT shared-subscription group {group:?} is not usable: it is the application_id, and \
                 $share/<group>/<filter> needs it non-empty and free of '/', '+' and '#'"
            )));
        }
        if stage.drain_limit() == 0 {
            return Err(Error::Invalid("drain_limit must be at least 1".into()));
        }
        Ok(Bridge {
            stage,
            config,
            client_id,
            group,
            observer,
            wakeup: Arc::new(Wakeup::new()),
            connection: Mutex::new(None),
        })
    }

    fn connection(&self) -> Result<Arc<Connection>, BoxError> {
        let running = self.connection.lock().unwrap_or_else(|p| p.into_inner());
        running
            .as_ref()
            .map(|r| Arc::clone(&r.connection))
            .ok_or_else(|| "the MQTT connection is not open (the stage's setup did not run)".into())
    }

    async fn connect(&self) -> Result<(), BoxError> {
        let session = Session { client_id: self.client_id.clone(), session_expiry: self.config.session_expiry };
        let broker = self.config.broker.broker();
        tracing::info!(%broker, client_id = %self.client_id, group = %self.group, expiry = ?self.config.session_expiry, "connecting to MQTT");
        let (client, events) = self.config.broker.connect(&session)?;
        let connection = Arc::new(Connection::new(
            client,
            self.group.clone(),
            self.config.qos,
            self.config.reconnect_grace,
            Arc::clone(&self.observer),
            Arc::clone(&self.wakeup),
        ));
        let pump = tokio::spawn(Arc::clone(&connection).pump(events));
        *self.connection.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Running { connection: Arc::clone(&connection), pump });
        match tokio::time::timeout(FIRST_CONNECT_TIMEOUT, connection.first_connection()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(format!("MQTT broker {broker}: {error}").into()),
            Err(_) => Err(format!("MQTT broker {broker}: no connection within {FIRST_CONNECT_TIMEOUT:?}").into()),
        }
    }

    async fn disconnect(&self) {
        let running = self.connection.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(running) = running {
            running.connection.disconnect().await;
            running.pump.abort();
        }
    }

    /// The relay template (MQ-30..37).
    async fn relay_batch(&self, config: Config, page: &mut Page<'_>) -> Result<(), BoxError> {
        let filter = config.require(&TOPIC)?;
        crate::mqtt::validate_filter(&filter)?;
        let connection = self.connection()?;
        connection.subscribe(&filter);
        // The previous invocation's messages: committed, by the re-entry contract (EXT-16).
        connection.ack_all_pending(&filter);
        let (batch, left) = connection.drain(&filter, self.stage.drain_limit())?;
        self.observer.mqtt_buffered(&filter, left);
        if left > 0 {
            // More than drain_limit were buffered: the leftovers go next cycle, at once.
            self.wakeup.set();
        }
        if batch.is_empty() {
            return Ok(());
        }
        let mut batch = Batch { connection: &connection, filter: &filter, forwarded: Vec::new(), rest: batch.into() };
        while let Some(msg) = batch.rest.front().cloned() {
            let relayed = decode(&msg.payload).and_then(|payload| {
                std::panic::catch_unwind(AssertUnwindSafe(|| self.stage.relay(&config, &msg.topic, payload)))
                    .unwrap_or_else(|panic| Err(panic_error("relay", panic)))
            });
            match relayed {
                Err(error) => {
                    // Poison (MQ-33): never the invalid-message hook, never a crash; at QoS 1
                    // with manual acks a crash would redeliver it forever.
                    tracing::warn!(topic = %msg.topic, %error, "dropping a poison MQTT message");
                    self.observer.mqtt_message_dropped(&filter, "poison");
                    ack(&connection, &msg);
                    batch.rest.pop_front();
                }
                Ok(None) => {
                    self.observer.mqtt_message_dropped(&filter, "filtered");
                    ack(&connection, &msg);
                    batch.rest.pop_front();
                }
                Ok(Some(message)) => {
                    // Handed to the producer, inside the page's transaction; on an error or a
                    // cancellation here, `batch` rolls back (MQ-35, MQ-36).
                    page.send(message).await?;
                    batch.rest.pop_front();
                    connection.mark_pending(&filter, msg.clone());
                    batch.forwarded.push(msg);
                }
            }
        }
        // One transaction for the batch; a stateless page writes no state (EXT-54).
        page.commit(State::new()).await?;
        connection.page_committed(&filter);
        batch.forwarded.clear();
        Ok(())
    }
}

/// A batch in the making: on drop (an error or a cancellation) the forwarded messages and the
/// unprocessed rest return to the head of the buffer (MQ-35). A committed batch is emptied
/// before it drops.
struct Batch<'a> {
    connection: &'a Connection,
    filter: &'a str,
    forwarded: Vec<Publish>,
    rest: VecDeque<Publish>,
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if self.forwarded.is_empty() && self.rest.is_empty() {
            return;
        }
        let rest: Vec<Publish> = self.rest.drain(..).collect();
        self.connection.roll_back(self.filter, &self.forwarded, rest);
    }
}

fn ack(connection: &Connection, msg: &Publish) {
    if connection.ack(msg) == Acked::Failed {
        tracing::warn!(topic = %msg.topic, "the ack of a dropped MQTT message did not leave: the broker will redeliver it");
    }
}

/// The payload as a JSON object (MQ-31): strict UTF-8 JSON; anything else is poison.
fn decode(payload: &[u8]) -> Result<Event, BoxError> {
    if payload.is_empty() {
        return Err("the payload is empty, not a JSON object".into());
    }
    Ok(Event::wrap(crate::wire::decode_value(Some(payload))?))
}

impl<S: MqttExtractor> Extractor for Bridge<S> {
    fn config_topics(&self) -> Vec<String> {
        self.stage.config_topics()
    }

    async fn poll(&self, config: Config, _state: State, page: &mut Page<'_>) -> Result<(), BoxError> {
        self.relay_batch(config, page).await
    }

    fn config_enricher(&self) -> Option<&dyn EnrichConfig> {
        self.stage.config_enricher()
    }

    fn on_invalid_message(&self, error: &InvalidMessageError) -> InvalidMessageAction {
        self.stage.on_invalid_message(error)
    }

    /// Reconciles the session with the active configs' filters (MQ-22): every replica gets the
    /// full active set; the filters of tombstoned, suspended or re-pointed configs go.
    async fn on_active_configs(&self, active: &BTreeMap<String, Config>) -> Result<(), BoxError> {
        let mut desired = BTreeSet::new();
        for (key, config) in active {
            let filter = config.require(&TOPIC).map_err(|e| format!("config {key:?}: {e}"))?;
            crate::mqtt::validate_filter(&filter).map_err(|e| format!("config {key:?}: {e}"))?;
            desired.insert(filter);
        }
        self.connection()?.reconcile(desired);
        Ok(())
    }

    fn wakeup(&self) -> Option<&Wakeup> {
        Some(&self.wakeup)
    }

    async fn setup(&self) -> Result<(), BoxError> {
        self.stage.setup().await?;
        if let Err(error) = self.connect().await {
            self.disconnect().await;
            return Err(error);
        }
        Ok(())
    }

    async fn teardown(&self) -> Result<(), BoxError> {
        // The runner calls this once every cycle has ended: what is pending was committed, and
        // its acknowledgements go out before the DISCONNECT (one request queue, in order), so a
        // clean stop hands the session on without duplicates (MQ-38).
        if let Ok(connection) = self.connection() {
            connection.ack_all_pending_at_stop();
        }
        // Plain DISCONNECT; nothing is unsubscribed (MQ-03): the session keeps buffering for the
        // next incarnation.
        self.disconnect().await;
        self.stage.teardown().await
    }
}

#[cfg(test)]
impl<S> Bridge<S> {
    pub(crate) fn connection_for_tests(&self) -> Arc<Connection> {
        let running = self.connection.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&running.as_ref().expect("set up").connection)
    }
}
