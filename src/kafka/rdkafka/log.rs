//! librdkafka's log lines, to `tracing` (target `librdkafka`).

#[allow(unused_imports)]
use super::*;

/// Routes librdkafka's log lines and global errors to `tracing`.
#[derive(Clone)]
pub(super) struct LogContext {
    pub(super) client: Arc<str>,
}

impl LogContext {
    pub(super) fn new(client_id: &str) -> Self {
        LogContext { client: client_id.into() }
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
    }

    fn error(&self, error: RdError, reason: &str) {
        tracing::warn!(target: "librdkafka", client = &*self.client, %error, "{reason}");
    }
}
