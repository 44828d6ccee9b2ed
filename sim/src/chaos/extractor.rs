//! Extractors: a stage that polls its own source for each config entry; its run is over once
//! the outputs stopped growing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use flechtwerk::IntoRunner;
use madsim::time::sleep;

use super::{Chaos, Factory, ReadTopics, Shape};
use crate::cluster::Cluster;
use crate::harness::replicas::stage_launch;
use crate::harness::{truth, QUIESCENCE_MAX};
use crate::runner::Ctx;

impl Chaos {
    /// A chaos test of the extractor that `stage` builds (called once per replica start).
    ///
    /// The things to poll are the config entries (`config`, `configs`); the stage reads its
    /// external source itself, and that source must give both runs the same items (a fixed or
    /// seeded one, shared by the replicas as a real source is). There are no inputs: once the
    /// faults stop, the run is over when no transaction is open and the output topics have
    /// not grown for [`Chaos::settle`] (default 20 poll intervals, at least
    /// 10 s). The oracle is the same: per output key the committed outputs, and per config the
    /// final state (its cursor), equal those of a one-replica run without faults.
    pub fn extractor<S, M>(stage: impl Fn() -> S + Send + Sync + 'static) -> Self
    where
        S: IntoRunner<M> + 'static,
        M: 'static,
    {
        let stage = Arc::new(stage);
        let read = stage.clone();
        let factory: Factory = Arc::new(move |app: String, max_poll_records: usize, poll_interval: Duration| {
            let stage = stage.clone();
            stage_launch(app, max_poll_records, Some(poll_interval), move || stage())
        });
        let read_topics: ReadTopics = Arc::new(move || read.as_ref()().read_topics());
        Chaos::new(Shape::Extractor(factory), read_topics)
    }

    /// Extractors: waits until the output topics stay unchanged with no transaction open (on
    /// them or the changelog) for the settle time, at most [`QUIESCENCE_MAX`]; whether they did.
    pub(super) async fn settled(&self, ctx: &Ctx, cluster: &Cluster, outputs: &[&str]) -> bool {
        let quiet = self.settle.unwrap_or_else(|| (self.poll_interval * 20).max(Duration::from_secs(10)));
        let changelog = format!("{}-changelog", self.application_id);
        let topics: Vec<&str> = outputs.iter().copied().chain([changelog.as_str()]).collect();
        // The outputs' ends (a page's cursor commits with its outputs, so the changelog is
        // settled with them; a stage may re-commit an unchanged cursor on every poll).
        let snapshot = || -> Option<Vec<BTreeMap<flechtwerk::kafka::TopicPartition, i64>>> {
            topics
                .iter()
                .all(|t| truth::no_open_transactions(cluster, t))
                .then(|| outputs.iter().map(|t| truth::log_ends(cluster, t)).collect())
        };
        let deadline = ctx.now() + QUIESCENCE_MAX;
        let mut last = (snapshot(), ctx.now());
        while ctx.now() < deadline {
            sleep(Duration::from_secs(1)).await;
            let now = snapshot();
            if now.is_none() || now != last.0 {
                last = (now, ctx.now());
            } else if ctx.now() - last.1 >= quiet {
                return true;
            }
        }
        false
    }
}
