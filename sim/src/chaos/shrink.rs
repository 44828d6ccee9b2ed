//! Which seeds a test runs (its own, or the environment's), and the shrinking of a failing
//! seed's fault schedule to few faults that still fail.

use super::Chaos;
use crate::harness::faults::FaultSchedule;

/// Runs the shrinker may spend on one failing seed.
const SHRINK_RUNS_MAX: usize = 60;

impl Chaos {
    /// Shrinking, within [`SHRINK_RUNS_MAX`] runs: no fault at all, then each fault alone (the
    /// simulation is chaotic: dropping one fault moves every later event, so a bug that one
    /// fault triggers is often found this way and not by removal), then greedy removal of one
    /// fault at a time while the seed still fails.
    pub(super) fn shrink(&self, seed: u64, schedule: &FaultSchedule) -> FaultSchedule {
        let mut runs = 0;
        let fails = |candidate: &FaultSchedule, runs: &mut usize| {
            *runs += 1;
            !self.run_seed(seed, candidate, false).is_empty()
        };
        if schedule.len() > 1 {
            let none = FaultSchedule::none();
            if fails(&none, &mut runs) {
                return none;
            }
            for keep in 0..schedule.len() {
                if runs >= SHRINK_RUNS_MAX {
                    break;
                }
                let others: Vec<usize> = (0..schedule.len()).filter(|&i| i != keep).collect();
                let alone = schedule.without(&others);
                if fails(&alone, &mut runs) {
                    return alone;
                }
            }
        }
        let mut current = schedule.clone();
        let mut changed = true;
        while changed && runs < SHRINK_RUNS_MAX {
            changed = false;
            let mut i = current.len();
            while i > 0 && runs < SHRINK_RUNS_MAX {
                i -= 1;
                let candidate = current.without(&[i]);
                if fails(&candidate, &mut runs) {
                    current = candidate;
                    changed = true;
                }
            }
        }
        current
    }

    /// `FLECHTWERK_CHAOS_FAULTS` (with `FLECHTWERK_CHAOS_SEED`): the positions of the seed's
    /// faults to keep (`2,5`, or `none`), as a failure's replay line prints them for its shrunk
    /// schedule. Panics on anything else, naming the variable.
    #[track_caller]
    pub(super) fn faults_to_replay(&self) -> Option<Vec<usize>> {
        std::env::var("FLECHTWERK_CHAOS_SEED").ok()?;
        let value = std::env::var("FLECHTWERK_CHAOS_FAULTS").ok()?;
        let value = value.trim();
        if value == "none" || value.is_empty() {
            return Some(Vec::new());
        }
        let kept = value.split(',').map(|n| n.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>();
        Some(kept.unwrap_or_else(|_| {
            panic!("FLECHTWERK_CHAOS_FAULTS={value:?}: expected fault positions such as `2,5`, or `none`")
        }))
    }

    /// The seeds to run: `FLECHTWERK_CHAOS_SEED` (one seed, verbose), else
    /// `FLECHTWERK_CHAOS_SEEDS` (`N` or `A..B`), else the test's own. Whether to print traces.
    pub(super) fn seeds_to_run(&self) -> (Vec<u64>, bool) {
        if let Some(seed) = std::env::var("FLECHTWERK_CHAOS_SEED").ok().and_then(|s| s.trim().parse().ok()) {
            return (vec![seed], true);
        }
        match std::env::var("FLECHTWERK_CHAOS_SEEDS").ok().as_deref().map(str::trim) {
            Some(range) if range.contains("..") => {
                let (a, b) = range.split_once("..").expect("checked");
                let (a, b) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
                ((a..b).collect(), false)
            }
            Some(n) if n.parse::<u64>().is_ok() => ((0..n.parse().expect("checked")).collect(), false),
            _ => (self.seeds.clone().collect(), false),
        }
    }
}
