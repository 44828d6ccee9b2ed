//! The recording observer (TST-04).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::observer::{InvalidOutcome, Observer};

/// One recorded observer call; durations are left out so recordings compare across runs.
///
/// ```
/// use flechtwerk::observer::Observer;
/// use flechtwerk::testing::{Observed, RecordingObserver};
/// let observer = RecordingObserver::default();
/// observer.message_in("clicks");
/// observer.batch_processed(1, std::time::Duration::from_millis(3));
/// assert_eq!(
///     observer.events(),
///     [Observed::MessageIn { topic: "clicks".into() }, Observed::BatchProcessed { size: 1 }]
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Observed {
    MessageIn { topic: String },
    MessageInBytes { topic: String, bytes: usize },
    MessageInvalid { topic: String, outcome: InvalidOutcome },
    MessageOut { topic: String },
    MessageOutBytes { topic: String, bytes: usize },
    MessageProcessed,
    BatchProcessed { size: usize },
    TransactionCommitted,
    PollCycle,
    ActiveConfigs { count: usize },
    ConfigMessageIn { topic: String },
    ConfigStoreEntries { count: usize },
    ConfigStoreRestored { count: usize },
    StateRestored { partition: i32, count: usize },
    StateRecordBytes { bytes: usize },
    TasksAssigned { count: usize },
    TokensAssigned { count: usize },
    MqttBuffered { topic: String, count: usize },
    MqttConnected,
    MqttDisconnected,
    MqttMessageDropped { topic: String, reason: String },
    MqttMessageIn { topic: String },
    KeyringKeyLoaded { kid: String },
    SecretPlaintextRead { scope: String },
    SecretDecrypted { scope: String, kid: String },
    SecretUnsignedRead { scope: String },
    SecretVerified { scope: String, kid: String },
}

/// An observer that records every call, in order (TST-04).
///
/// ```
/// use flechtwerk::observer::Observer;
/// use flechtwerk::testing::{Observed, RecordingObserver};
/// let observer = RecordingObserver::default();
/// observer.transaction_committed();
/// assert_eq!(observer.events(), vec![Observed::TransactionCommitted]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct RecordingObserver {
    events: Arc<Mutex<Vec<Observed>>>,
}

impl RecordingObserver {
    /// A copy of everything recorded so far.
    ///
    /// ```
    /// use flechtwerk::observer::Observer;
    /// use flechtwerk::testing::{Observed, RecordingObserver};
    /// let observer = RecordingObserver::default();
    /// observer.tasks_assigned(4);
    /// assert_eq!(observer.events(), [Observed::TasksAssigned { count: 4 }]);
    /// ```
    pub fn events(&self) -> Vec<Observed> {
        self.events.lock().expect("observer lock").clone()
    }

    /// Forgets everything recorded so far.
    ///
    /// ```
    /// use flechtwerk::observer::Observer;
    /// use flechtwerk::testing::RecordingObserver;
    /// let observer = RecordingObserver::default();
    /// observer.transaction_committed();
    /// observer.clear(); // e.g. after startup, to look at one phase only
    /// assert!(observer.events().is_empty());
    /// ```
    pub fn clear(&self) {
        self.events.lock().expect("observer lock").clear();
    }

    fn push(&self, event: Observed) {
        self.events.lock().expect("observer lock").push(event);
    }
}

impl Observer for RecordingObserver {
    fn message_in(&self, topic: &str) {
        self.push(Observed::MessageIn { topic: topic.to_owned() });
    }
    fn message_in_bytes(&self, topic: &str, bytes: usize) {
        self.push(Observed::MessageInBytes { topic: topic.to_owned(), bytes });
    }
    fn message_invalid(&self, topic: &str, outcome: InvalidOutcome) {
        self.push(Observed::MessageInvalid { topic: topic.to_owned(), outcome });
    }
    fn message_out(&self, topic: &str) {
        self.push(Observed::MessageOut { topic: topic.to_owned() });
    }
    fn message_out_bytes(&self, topic: &str, bytes: usize) {
        self.push(Observed::MessageOutBytes { topic: topic.to_owned(), bytes });
    }
    fn message_processed(&self, _elapsed: Duration) {
        self.push(Observed::MessageProcessed);
    }
    fn batch_processed(&self, size: usize, _elapsed: Duration) {
        self.push(Observed::BatchProcessed { size });
    }
    fn transaction_committed(&self) {
        self.push(Observed::TransactionCommitted);
    }
    fn poll_cycle(&self, _elapsed: Duration) {
        self.push(Observed::PollCycle);
    }
    fn active_configs(&self, count: usize) {
        self.push(Observed::ActiveConfigs { count });
    }
    fn config_message_in(&self, topic: &str) {
        self.push(Observed::ConfigMessageIn { topic: topic.to_owned() });
    }
    fn config_store_entries(&self, count: usize) {
        self.push(Observed::ConfigStoreEntries { count });
    }
    fn config_store_restored(&self, count: usize) {
        self.push(Observed::ConfigStoreRestored { count });
    }
    fn state_restored(&self, partition: i32, count: usize) {
        self.push(Observed::StateRestored { partition, count });
    }
    fn state_record_bytes(&self, bytes: usize) {
        self.push(Observed::StateRecordBytes { bytes });
    }
    fn tasks_assigned(&self, count: usize) {
        self.push(Observed::TasksAssigned { count });
    }
    fn tokens_assigned(&self, count: usize) {
        self.push(Observed::TokensAssigned { count });
    }
    fn mqtt_buffered(&self, topic: &str, count: usize) {
        self.push(Observed::MqttBuffered { topic: topic.to_owned(), count });
    }
    fn mqtt_connected(&self) {
        self.push(Observed::MqttConnected);
    }
    fn mqtt_disconnected(&self) {
        self.push(Observed::MqttDisconnected);
    }
    fn mqtt_message_dropped(&self, topic: &str, reason: &str) {
        self.push(Observed::MqttMessageDropped { topic: topic.to_owned(), reason: reason.to_owned() });
    }
    fn mqtt_message_in(&self, topic: &str) {
        self.push(Observed::MqttMessageIn { topic: topic.to_owned() });
    }
    fn keyring_key_loaded(&self, kid: &str) {
        self.push(Observed::KeyringKeyLoaded { kid: kid.to_owned() });
    }
    fn secret_plaintext_read(&self, scope: &str) {
        self.push(Observed::SecretPlaintextRead { scope: scope.to_owned() });
    }
    fn secret_decrypted(&self, scope: &str, kid: &str) {
        self.push(Observed::SecretDecrypted { scope: scope.to_owned(), kid: kid.to_owned() });
    }
    fn secret_unsigned_read(&self, scope: &str) {
        self.push(Observed::SecretUnsignedRead { scope: scope.to_owned() });
    }
    fn secret_verified(&self, scope: &str, kid: &str) {
        self.push(Observed::SecretVerified { scope: scope.to_owned(), kid: kid.to_owned() });
    }
}
