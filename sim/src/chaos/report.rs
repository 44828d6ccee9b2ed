//! What a failing seed reports: the [`Failure`] a test panics with, the timeline of its shrunk
//! run, and the oracle's differences per key between the reference and the chaos run.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;

use super::run::SeedRun;
use super::{Chaos, Outcome, DIFFS_SHOWN};
use crate::harness::faults::{Fault, FaultSchedule};
use crate::timeline::{Picture, ScheduledFault};
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
    /// What the seed's whole schedule violated (the first run of the seed).
    pub violations: Vec<String>,
    /// The seed's fault schedule.
    pub schedule: FaultSchedule,
    /// The fewest faults found that still fail (the seed's schedule when nothing could go).
    pub shrunk: FaultSchedule,
    /// What the shrunk schedule's run violated: the run the timeline draws and the replay line
    /// replays.
    pub shrunk_violations: Vec<String>,
    /// What each fault of `shrunk` hit in that run (`replica-1` for a fault aimed at
    /// `replica#7`, the `7 mod n`-th live replica; `None` for a fault that names no node).
    pub shrunk_hits: Vec<Option<String>>,
    /// Whether the engine's fault points (buggify) were on in the shrunk run, and from when
    /// to when (from the start of the fault period).
    pub buggify: Option<(Duration, Duration)>,
    /// The engine's stalls at its fault points in the shrunk run: when (from the start of the
    /// fault period) and what (`task.before_commit stalled 1234 ms`).
    pub buggify_stalls: Vec<(Duration, String)>,
    /// The SVG timeline of the shrunk schedule's failing run (see [`crate::timeline`]), if it
    /// could be written.
    pub timeline: Option<std::path::PathBuf>,
    /// A shell command that replays the shrunk failure as pasted: the seed, the shrunk
    /// schedule's faults (`FLECHTWERK_CHAOS_FAULTS`, their positions in the seed's schedule),
    /// the test binary, its profile and target directory, and the test's name.
    pub replay: String,
}

/// Where the printed schedules and the timeline count time from.
pub(super) const TIME_ORIGIN: &str = "time from the start of the fault period, when the first replica ran tasks";

/// A fault's line as the schedule prints it, with the node its slot resolved to in the run
/// (`isolate replica#7 → replica-1 for 7s`).
pub(super) fn with_hit(fault: &Fault, hit: Option<&str>) -> String {
    let text = fault.to_string();
    let Some(hit) = hit else { return text };
    for slot in ["replica#", "broker#"] {
        if let Some(at) = text.find(slot) {
            let digits =
                text[at + slot.len()..].find(|c: char| !c.is_ascii_digit()).map_or(text.len(), |n| at + slot.len() + n);
            return format!("{} → {hit}{}", &text[..digits], &text[digits..]);
        }
    }
    format!("{text} → {hit}")
}

/// A schedule's lines (`+  2.345s isolate replica#7 → replica-1 for 7s`), each fault with what
/// it hit when `hits` are known.
pub(super) fn schedule_lines(schedule: &FaultSchedule, hits: &[Option<String>]) -> Vec<String> {
    if schedule.is_empty() {
        return vec!["(no faults)".to_owned()];
    }
    schedule
        .faults
        .iter()
        .enumerate()
        .map(|(i, timed)| {
            let hit = hits.get(i).and_then(Option::as_deref);
            format!("+{:>7.3}s {}", timed.at.as_secs_f64(), with_hit(&timed.fault, hit))
        })
        .collect()
}

/// The engine's stalls at its fault points in a run (see `stalls`), from `origin`.
pub(super) fn buggify_stalls(events: &[Event], origin: Duration) -> Vec<(Duration, String)> {
    events
        .iter()
        .filter_map(|e| Some((e.at.saturating_sub(origin), e.what.strip_prefix("buggify: ")?.to_owned())))
        .collect()
}

/// When the engine's fault points were on in a run (from "buggify on" to "faults stop"), from
/// `origin`.
pub(super) fn buggify_window(events: &[Event], origin: Duration) -> Option<(Duration, Duration)> {
    let on = events.iter().find(|e| e.what == "buggify on")?.at;
    let off = events
        .iter()
        .find(|e| e.what == "faults stop" || e.what.starts_with("buggify off"))
        .map_or_else(|| events.last().map_or(on, |e| e.at), |e| e.at);
    Some((on.saturating_sub(origin), off.saturating_sub(origin)))
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
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        writeln!(
            f,
            "seed {} failed; its {} fault{} shrink to {} that still fail{}.",
            self.seed,
            self.schedule.len(),
            plural(self.schedule.len()),
            self.shrunk.len(),
            if self.shrunk.len() == 1 { "s" } else { "" }
        )?;
        if self.shrunk_violations.is_empty() {
            writeln!(f, "the shrunk run passed when run again (the harness is not deterministic: a bug of ours)")?;
        } else {
            writeln!(f, "violations of the shrunk run (the run the timeline draws and the replay line replays):")?;
            for v in &self.shrunk_violations {
                writeln!(f, "  - {v}")?;
            }
        }
        if self.violations != self.shrunk_violations {
            writeln!(
                f,
                "violations of the seed's whole schedule ({} faults), where it failed first:",
                self.schedule.len()
            )?;
            for v in &self.violations {
                writeln!(f, "  - {v}")?;
            }
        }
        writeln!(
            f,
            "the shrunk schedule ({TIME_ORIGIN}; replica#N is the N mod n-th live replica, → the one it hit):"
        )?;
        for line in schedule_lines(&self.shrunk, &self.shrunk_hits) {
            writeln!(f, "  {line}")?;
        }
        match self.buggify {
            Some((on, off)) => {
                let shown: Vec<String> = self
                    .buggify_stalls
                    .iter()
                    .take(3)
                    .map(|(at, what)| format!("+{:.3}s {what}", at.as_secs_f64()))
                    .collect();
                writeln!(
                    f,
                    "the engine's fault points (buggify) were on in the shrunk run, from +{:.3}s to +{:.3}s, besides the \
                     faults above: {} stall{}{}",
                    on.as_secs_f64(),
                    off.as_secs_f64(),
                    self.buggify_stalls.len(),
                    if self.buggify_stalls.len() == 1 { "" } else { "s" },
                    if shown.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " ({}{})",
                            shown.join(", "),
                            if self.buggify_stalls.len() > shown.len() { ", …" } else { "" }
                        )
                    }
                )?
            }
            None => writeln!(f, "the engine's fault points (buggify) were off in the shrunk run")?,
        }
        let differs = oracle_differs(&self.shrunk_violations);
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
            writeln!(f, "timeline of the shrunk run (and of its reference run): {}", path.display())?;
        }
        write!(f, "replay the shrunk run: {}", self.replay)
    }
}

impl Chaos {
    /// Writes the timeline of `run`, the run of `schedule` on `seed`: into
    /// `FLECHTWERK_CHAOS_TIMELINE_DIR`, or `flechtwerk-chaos` in the system's temporary
    /// directory, named after the test (its thread) and the seed.
    pub(super) fn write_timeline(
        &self,
        seed: u64,
        schedule: &FaultSchedule,
        run: &SeedRun,
    ) -> Option<std::path::PathBuf> {
        let dir = std::env::var_os("FLECHTWERK_CHAOS_TIMELINE_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("flechtwerk-chaos"));
        let test = std::thread::current().name().unwrap_or("chaos").replace("::", "-");
        let path = dir.join(format!("{test}-seed-{seed}.svg"));
        let mut notes = vec![format!(
            "the shrunk schedule, {} fault{} ({TIME_ORIGIN}):",
            schedule.len(),
            if schedule.len() == 1 { "" } else { "s" }
        )];
        notes.extend(schedule_lines(schedule, &run.hits).into_iter().map(|l| format!("  {l}")));
        if let Some((on, off)) = buggify_window(&run.events, run.origin) {
            notes.push(format!(
                "the engine's fault points (buggify) were on from +{:.3}s to +{:.3}s: {} stalls (the dark marks in their row)",
                on.as_secs_f64(),
                off.as_secs_f64(),
                buggify_stalls(&run.events, run.origin).len()
            ));
        }
        let differs = oracle_differs(&run.violations);
        if schedule.is_empty() && differs {
            notes.push(
                "with no fault at all the chaos run differs from the reference run (its lanes under the line): the \
                 stage itself is not deterministic; the violations above name the keys and fields that differ"
                    .to_owned(),
            );
        }
        let faults = schedule
            .faults
            .iter()
            .enumerate()
            .map(|(i, timed)| {
                let hit = run.hits.get(i).cloned().flatten();
                ScheduledFault {
                    at: timed.at,
                    duration: timed.fault.duration(),
                    kind: timed.fault.kind(),
                    text: with_hit(&timed.fault, hit.as_deref()),
                    hit,
                }
            })
            .collect();
        let picture = Picture {
            title: format!(
                "{test}: seed {seed}, the shrunk run ({} fault{})",
                schedule.len(),
                if schedule.len() == 1 { "" } else { "s" }
            ),
            events: &run.events,
            origin: Some(run.origin),
            faults: Some(faults),
            violations: Some(run.violations.clone()),
            reference: run.reference.as_ref().map(|(events, origin)| (events.as_slice(), *origin)),
            notes,
        };
        let svg = crate::timeline::render(&picture);
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, svg)).ok().map(|()| path)
    }
}

/// Whether `violations` hold one of [`diff`]'s differences (the chaos run's outputs or state
/// against the reference's), as opposed to a check of the run alone.
fn oracle_differs(violations: &[String]) -> bool {
    violations.iter().any(|v| v.starts_with("outputs of") || v.starts_with("final state of"))
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
