//! The engine's fault points (buggify) in a chaos run's trace: a `tracing` subscriber, the
//! seed thread's default for its run, that records each stall the engine's points log
//! (`buggify: stall`, with the point's name and its length) as a trace event
//! `buggify: <point> stalled <ms> ms`, for the failure and the timeline, and hands everything to
//! the subscriber that was the default before (a test's own logging keeps working).
//!
//! Only the chaos harness installs it: the scenarios' traces (and their hashes) stay as they
//! are.

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Dispatch, Event, Metadata, Subscriber};

use crate::runner::Ctx;

/// The message the engine's fault points log a stall with (`src/engine/buggify.rs`).
const STALL: &str = "buggify: stall";

/// Records the engine's stalls into a run's trace, forwarding everything to `inner`.
pub(super) struct Stalls {
    ctx: Ctx,
    inner: Dispatch,
}

impl Stalls {
    pub(super) fn new(ctx: Ctx) -> Self {
        let inner = tracing::dispatcher::get_default(Dispatch::clone);
        Stalls { ctx, inner }
    }

    fn is_stall(metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("flechtwerk") && metadata.fields().field("point").is_some()
    }
}

#[derive(Default)]
struct StallFields {
    message: String,
    point: String,
    ms: u64,
}

impl Visit for StallFields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "point" => self.point = format!("{value:?}").trim_matches('"').to_owned(),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "point" {
            self.point = value.to_owned();
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "ms" {
            self.ms = value;
        }
    }
}

impl Subscriber for Stalls {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if Self::is_stall(metadata) {
            Interest::always()
        } else {
            self.inner.register_callsite(metadata)
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        Self::is_stall(metadata) || self.inner.enabled(metadata)
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.inner.new_span(span)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.inner.record(span, values);
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.inner.record_follows_from(span, follows);
    }

    fn event(&self, event: &Event<'_>) {
        if Self::is_stall(event.metadata()) {
            let mut fields = StallFields::default();
            event.record(&mut fields);
            if fields.message == STALL {
                self.ctx.event(format!("buggify: {} stalled {} ms", fields.point, fields.ms));
            }
        }
        if self.inner.enabled(event.metadata()) {
            self.inner.event(event);
        }
    }

    fn enter(&self, span: &Id) {
        self.inner.enter(span);
    }

    fn exit(&self, span: &Id) {
        self.inner.exit(span);
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.inner.clone_span(id)
    }

    fn try_close(&self, id: Id) -> bool {
        self.inner.try_close(id)
    }
}
