//! librdkafka's log lines, to `tracing` (target `librdkafka`); its error callback, which also
//! fills the client's refusal slot (see [`Refusal`]).

use std::sync::Arc;

use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError as RdError;
use rdkafka::ClientContext;

use super::security::{refusal, Refusal};

/// Routes librdkafka's log lines and global errors to `tracing`, and keeps the client's refusal.
#[derive(Clone)]
pub(super) struct LogContext {
    pub(super) client: Arc<str>,
    pub(super) refusal: Arc<Refusal>,
    /// Whether the client speaks TLS (a plaintext client's dropped first request is a hint).
    pub(super) tls: bool,
}

impl LogContext {
    pub(super) fn new(client_id: &str, tls: bool) -> Self {
        LogContext { client: client_id.into(), refusal: Arc::new(Refusal::new()), tls }
    }
}

impl ClientContext for LogContext {
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let client = &*self.client;
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical | RDKafkaLogLevel::Error => {
                tracing::error!(target: "librdkafka", client, facility, "{message}");
            }
            RDKafkaLogLevel::Warning => tracing::warn!(target: "librdkafka", client, facility, "{message}"),
            RDKafkaLogLevel::Notice | RDKafkaLogLevel::Info => {
                tracing::info!(target: "librdkafka", client, facility, "{message}");
            }
            RDKafkaLogLevel::Debug => tracing::debug!(target: "librdkafka", client, facility, "{message}"),
        }
        // A consumer's errors reach the application as bare codes from poll; the reason is only
        // in this log line (facility FAIL: a broker connection failed).
        if facility == "FAIL" {
            if let Some(refused) = refusal(None, message, self.tls) {
                self.refusal.record(client, refused);
            }
        }
    }

    fn error(&self, error: RdError, reason: &str) {
        tracing::warn!(target: "librdkafka", client = &*self.client, %error, "{reason}");
        if let Some(refused) = refusal(error.rdkafka_error_code(), reason, self.tls) {
            self.refusal.record(&self.client, refused);
        }
    }
}
