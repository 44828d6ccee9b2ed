//! The conformance suite on the in-process cluster (`LocalCluster`), on paused tokio time.

use flechtwerk::kafka::conformance::{run_all, Env};
use flechtwerk_sim::cluster::LocalCluster;

#[tokio::test(start_paused = true)]
async fn conformance_suite_passes_on_the_local_cluster() {
    let cluster = LocalCluster::new();
    let verdicts = run_all(&cluster, &Env::new("local")).await;
    let failed: Vec<String> =
        verdicts.iter().filter_map(|(name, v)| v.as_ref().err().map(|e| format!("{name}: {e}"))).collect();
    assert!(failed.is_empty(), "failed scenarios: {failed:#?}\ntrace:\n{}", cluster.trace().render());
}
