//! librdkafka's log lines, to `tracing` (target `librdkafka`); its error callback, which also
//! fills the client's refusal slot (see [`Refusal`]); the partitions the broker refused to add to
//! a transaction (see [`TxnRefusals`]); and the same for the clients whose main queue we poll
//! ourselves ([`forward_log_or_error`]).

use std::ffi::CStr;
use std::sync::Arc;

use rdkafka::bindings as rdsys;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::KafkaError as RdError;
use rdkafka::ClientContext;

use super::security::{refusal, Refusal, TxnRefusals};

/// Routes librdkafka's log lines and global errors to `tracing`, and keeps the client's refusal.
#[derive(Clone)]
pub(super) struct LogContext {
    pub(super) client: Arc<str>,
    pub(super) refusal: Arc<Refusal>,
    /// Whether the client speaks TLS (a plaintext client's dropped first request is a hint).
    pub(super) tls: bool,
    /// A transactional producer's partitions the broker refused to add to the transaction.
    pub(super) txn_refusals: Arc<TxnRefusals>,
}

impl LogContext {
    /// The context of client `client_id` of the cluster at `bootstrap_servers`.
    pub(super) fn new(client_id: &str, tls: bool, bootstrap_servers: &str) -> Self {
        LogContext {
            client: client_id.into(),
            refusal: Arc::new(Refusal::new(bootstrap_servers)),
            tls,
            txn_refusals: Arc::default(),
        }
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
        // A partition the broker would not add to the transaction: only this line names it.
        if facility == "ADDPARTS" {
            self.txn_refusals.record(message);
        }
    }

    fn error(&self, error: RdError, reason: &str) {
        tracing::warn!(target: "librdkafka", client = &*self.client, %error, "{reason}");
        if let Some(refused) = refusal(error.rdkafka_error_code(), reason, self.tls) {
            self.refusal.record(&self.client, refused);
        }
    }
}

/// Hands a log line or an error taken from a client's main queue to `log`, as rdkafka's own poll
/// hands them to a client's context; any other event is left alone. For the clients whose main
/// queue we poll ourselves (the admin client's pump, the producer's delivery poller): rdkafka
/// sets `log.queue`, so their log lines and errors wait there and reach no callback.
///
/// # Safety
/// `event` is a live event of librdkafka's queue, not destroyed before this returns (the caller
/// destroys it afterwards).
pub(super) unsafe fn forward_log_or_error(event: *mut rdsys::rd_kafka_event_t, log: &LogContext) {
    // SAFETY: per the function's contract; the strings are the event's and copied before it is
    // destroyed.
    unsafe {
        match rdsys::rd_kafka_event_type(event) {
            rdsys::RD_KAFKA_EVENT_LOG => {
                let (mut facility, mut message, mut level) = (std::ptr::null(), std::ptr::null(), 0);
                if rdsys::rd_kafka_event_log(event, &mut facility, &mut message, &mut level) == 0 {
                    let facility = CStr::from_ptr(facility).to_string_lossy();
                    let message = CStr::from_ptr(message).to_string_lossy();
                    log.log(log_level(level), facility.trim(), message.trim());
                }
            }
            rdsys::RD_KAFKA_EVENT_ERROR => {
                let code = rdsys::rd_kafka_event_error(event);
                let reason = CStr::from_ptr(rdsys::rd_kafka_event_error_string(event)).to_string_lossy();
                log.error(RdError::Global(code.into()), reason.trim());
            }
            // Statistics are not enabled; OAUTHBEARER is not offered.
            _ => {}
        }
    }
}

/// A syslog level of librdkafka's (0 to 7) as rdkafka maps the levels of the log lines it hands
/// over itself, so a line's level does not depend on which client logged it.
fn log_level(level: i32) -> RDKafkaLogLevel {
    match level {
        0 => RDKafkaLogLevel::Emerg,
        1 => RDKafkaLogLevel::Alert,
        2 => RDKafkaLogLevel::Critical,
        3 => RDKafkaLogLevel::Error,
        4 => RDKafkaLogLevel::Warning,
        5 => RDKafkaLogLevel::Notice,
        6 => RDKafkaLogLevel::Info,
        _ => RDKafkaLogLevel::Debug,
    }
}
