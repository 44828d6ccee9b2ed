//! What a failing seed reports: the [`Failure`] a test panics with, the timeline of its shrunk
//! run, and the oracle's differences per key between the reference and the chaos run.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use super::{Chaos, Outcome, DIFFS_SHOWN};
use crate::harness::faults::FaultSchedule;
use crate::trace::Event;

/// What the seeds of one `Chaos` run did, for the line it prints at its end: a green run says
/// how much it tried, not nothing.
#[derive(Debug, Default)]
pub(super) struct RunSummary {
    seeds: usize,
    faults: BTreeMap<&'static str, usize>,
    handovers: usize,
    aborted: usize,
    simulated: Duration,
}

impl RunSummary {
    /// Adds one seed's chaos run: its schedule and its trace.
    pub(super) fn add(&mut self, schedule: &FaultSchedule, events: &[Event]) {
        self.seeds += 1;
        for timed in &schedule.faults {
            *self.faults.entry(timed.fault.kind()).or_default() += 1;
        }
        for event in events {
            // The simulated broker's words for a producer fenced by its successor's
            // InitProducerId (a task or token changing hands) and for an aborted transaction.
            if event.what.contains("fenced by InitProducerId") {
                self.handovers += 1;
            } else if event.what.contains(": complete abort #") {
                self.aborted += 1;
            }
        }
        self.simulated += events.last().map_or(Duration::ZERO, |e| e.at);
    }
}

impl fmt::Display for RunSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let faults: Vec<String> = self.faults.iter().map(|(kind, n)| format!("{kind}={n}")).collect();
        write!(
            f,
            "chaos: {} seeds, {:.0} s simulated; faults: {}; {} handovers (a producer fenced by its \
             successor), {} transactions aborted",
            self.seeds,
            self.simulated.as_secs_f64(),
            if faults.is_empty() { "none".to_owned() } else { faults.join(", ") },
            self.handovers,
            self.aborted
        )
    }
}

/// Why a seed failed.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// What was violated.
    pub violations: Vec<String>,
    /// The seed's fault schedule.
    pub schedule: FaultSchedule,
    /// The fewest faults found that still fail (the seed's schedule when nothing could go).
    pub shrunk: FaultSchedule,
    /// The SVG timeline of the shrunk schedule's failing run (see [`crate::timeline`]), if it
    /// could be written.
    pub timeline: Option<std::path::PathBuf>,
    /// A shell command that replays the shrunk failure as pasted: the seed, the shrunk
    /// schedule's faults (`FLECHTWERK_CHAOS_FAULTS`, their positions in the seed's schedule),
    /// the test binary, its profile and target directory, and the test's name.
    pub replay: String,
}

impl Failure {
    /// The positions in `schedule` of the faults `shrunk` kept (the shrinker only removes).
    pub(super) fn kept(schedule: &FaultSchedule, shrunk: &FaultSchedule) -> Vec<usize> {
        let mut kept = Vec::new();
        let mut wanted = shrunk.faults.iter().peekable();
        for (i, fault) in schedule.faults.iter().enumerate() {
            if wanted.peek() == Some(&fault) {
                kept.push(i);
                wanted.next();
            }
        }
        assert!(wanted.next().is_none(), "a shrunk schedule is a subsequence of its seed's schedule");
        kept
    }

    /// The command that replays `seed` with the faults at `kept`, built from this process: the
    /// running test binary names the target (`--test NAME`), its directory the target
    /// directory and the profile, the thread the test.
    pub(super) fn replay_command(seed: u64, kept: &[usize]) -> String {
        let faults: Vec<String> = kept.iter().map(ToString::to_string).collect();
        let mut command = format!(
            "FLECHTWERK_CHAOS_SEED={seed} FLECHTWERK_CHAOS_FAULTS={} RUSTFLAGS=\"--cfg madsim\"",
            if faults.is_empty() { "none".to_owned() } else { faults.join(",") }
        );
        let exe = std::env::current_exe().ok();
        // <target>/<profile>/deps/<name>-<hash>
        let deps = exe.as_deref().and_then(std::path::Path::parent);
        let profile_dir = deps.and_then(std::path::Path::parent);
        let target = profile_dir.and_then(std::path::Path::parent);
        if let Some(target) = target {
            command.push_str(&format!(" CARGO_TARGET_DIR={}", target.display()));
        }
        command.push_str(" cargo test");
        if profile_dir.and_then(std::path::Path::file_name).is_some_and(|p| p == "release") {
            command.push_str(" --release");
        }
        let stem = exe.as_deref().and_then(std::path::Path::file_stem).map(|s| s.to_string_lossy().into_owned());
        if let Some((name, _hash)) = stem.as_deref().and_then(|s| s.rsplit_once('-')) {
            command.push_str(&format!(" --test {name}"));
        }
        match std::thread::current().name() {
            Some(test) if test != "main" => command.push_str(&format!(" -- --exact {test} --nocapture")),
            _ => command.push_str(" -- --nocapture"),
        }
        command
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} failed:", self.seed)?;
        for v in &self.violations {
            writeln!(f, "  - {v}")?;
        }
        writeln!(f, "its {} faults shrink to {} that still fail:", self.schedule.len(), self.shrunk.len())?;
        for line in self.shrunk.to_string().lines() {
            writeln!(f, "  {line}")?;
        }
        let differs = self.violations.iter().any(|v| v.starts_with("outputs of") || v.starts_with("final state of"));
        if self.shrunk.is_empty() && differs {
            writeln!(
                f,
                "with no fault at all the chaos run differs from the reference: the stage itself is not \
                 deterministic. The oracle needs the same outputs from the same inputs — look for a clock, \
                 randomness, a replica's name or an unordered iteration in what it writes (the fields that \
                 differ are named above); `Chaos::normalize_outputs` can mask a field that may differ"
            )?;
        }
        if let Some(path) = &self.timeline {
            writeln!(f, "timeline of the shrunk run: {}", path.display())?;
        }
        write!(f, "replay the shrunk run: {}", self.replay)
    }
}

impl Chaos {
    /// Runs `schedule` on `seed` again and writes the chaos run's timeline: into
    /// `FLECHTWERK_CHAOS_TIMELINE_DIR`, or `flechtwerk-chaos` in the system's temporary
    /// directory, named after the test (its thread) and the seed.
    pub(super) fn write_timeline(&self, seed: u64, schedule: &FaultSchedule) -> Option<std::path::PathBuf> {
        let (violations, events) = self.run_seed_traced(seed, schedule, false);
        let dir = std::env::var_os("FLECHTWERK_CHAOS_TIMELINE_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("flechtwerk-chaos"));
        let test = std::thread::current().name().unwrap_or("chaos").replace("::", "-");
        let path = dir.join(format!("{test}-seed-{seed}.svg"));
        let mut notes: Vec<String> = violations.iter().map(|v| format!("violated: {v}")).collect();
        notes.push(format!("faults ({}):", schedule.len()));
        notes.extend(schedule.to_string().lines().map(|l| format!("  {l}")));
        let svg = crate::timeline::render_svg(&events, &format!("{test}: seed {seed}"), &notes);
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, svg)).ok().map(|()| path)
    }
}

/// The differences between the reference outcome and the chaos run's, per key.
pub(super) fn diff(reference: &Outcome, chaos: &Outcome) -> Vec<String> {
    let mut diffs = Vec::new();
    let show = |values: &[Option<Bytes>]| -> String {
        let shown: Vec<String> = values
            .iter()
            .take(8)
            .map(|v| v.as_deref().map_or("null".into(), |b| String::from_utf8_lossy(b).into_owned()))
            .collect();
        let more = if values.len() > 8 { format!(" … ({} in all)", values.len()) } else { String::new() };
        format!("[{}]{more}", shown.join(", "))
    };
    let keys: std::collections::BTreeSet<_> = reference.outputs.keys().chain(chaos.outputs.keys()).collect();
    let mut differing = 0;
    for key in keys {
        let want = reference.outputs.get(key).map(Vec::as_slice).unwrap_or_default();
        let got = chaos.outputs.get(key).map(Vec::as_slice).unwrap_or_default();
        if want != got {
            differing += 1;
            if differing > DIFFS_SHOWN {
                continue;
            }
            let at = want.iter().zip(got).position(|(a, b)| a != b).unwrap_or(want.len().min(got.len()));
            let fields = match (want.get(at), got.get(at)) {
                (Some(Some(a)), Some(Some(b))) => differing_fields(a, b),
                _ => Vec::new(),
            };
            diffs.push(format!(
                "outputs of {}/{}: {} under chaos, {} in the reference; first difference at #{at}{}: chaos {} vs \
                 reference {}",
                key.0,
                key.1,
                got.len(),
                want.len(),
                if fields.is_empty() { String::new() } else { format!(" (fields that differ: {})", fields.join(", ")) },
                show(&got[at.min(got.len())..]),
                show(&want[at.min(want.len())..]),
            ));
        }
    }
    if differing > DIFFS_SHOWN {
        diffs.push(format!("… and the outputs of {} more keys differ", differing - DIFFS_SHOWN));
    }
    let keys: std::collections::BTreeSet<_> = reference.state.keys().chain(chaos.state.keys()).collect();
    let mut differing = 0;
    for key in keys {
        let want = reference.state.get(key).cloned().flatten();
        let got = chaos.state.get(key).cloned().flatten();
        if want != got {
            differing += 1;
            if differing > DIFFS_SHOWN {
                continue;
            }
            diffs.push(format!(
                "final state of {} (changelog partition {}): chaos {:?}, reference {:?}",
                key.1,
                key.0,
                got.as_deref().map(String::from_utf8_lossy),
                want.as_deref().map(String::from_utf8_lossy),
            ));
        }
    }
    if differing > DIFFS_SHOWN {
        diffs.push(format!("… and the final states of {} more keys differ", differing - DIFFS_SHOWN));
    }
    diffs
}

/// The top-level fields whose values differ between two JSON objects (empty when either is not
/// one).
fn differing_fields(a: &[u8], b: &[u8]) -> Vec<String> {
    let object = |bytes: &[u8]| match std::str::from_utf8(bytes).ok().map(flechtwerk::json::parse) {
        Some(Ok(flechtwerk::json::Value::Object(map))) => Some(map),
        _ => None,
    };
    let (Some(a), Some(b)) = (object(a), object(b)) else { return Vec::new() };
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    names.into_iter().filter(|name| a.get(*name) != b.get(*name)).cloned().collect()
}
