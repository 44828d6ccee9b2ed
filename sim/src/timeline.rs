//! A failing run as a picture: an SVG timeline rendered from a run's trace.
//!
//! Lanes over simulated time, top to bottom:
//! - the faults, one row each, named by the schedule's kind names (`Fault::kind`) and the
//!   node they hit: a band as long as the fault lasts, a tick for the instantaneous ones;
//! - the engine's fault points (buggify), when on: a band while they were on;
//! - one lane per replica: alive from its start, each application start (▲), crash (✖) and
//!   stop, shaded by how many tasks or tokens it held (the number is written in the band);
//! - one lane per transactional id: every transaction as a bar from its begin to its end,
//!   green when it committed, red when it aborted (fenced, timed out or failed), grey while it
//!   was still open at the end;
//! - for the chaos harness, the reference run's replica and transaction lanes (one replica, no
//!   faults), aligned at its fault period's start;
//! - the violations, listed under the lanes (wrapped to the picture's width), with a marker at
//!   the time each was recorded, and the notes.
//!
//! The time axis says where it counts from: the start of the fault period when the caller
//! gives it (the chaos harness: the moment the first replica ran tasks, the origin of its
//! printed schedules too), else the start of the run.
//!
//! [`render_svg`] reads only the trace's text (the events every scenario and the harness
//! already record), so it works for any run: `flechtwerk-sim --seed S --timeline FILE`. The
//! chaos harness calls [`render`] with its schedule, what each fault hit, and the reference run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::trace::Event;

const LANE: f64 = 22.0;
const LEFT: f64 = 190.0;
const WIDTH: f64 = 1400.0;
/// Characters of the 11 px monospace font in a lane label, and in a line of text under the
/// lanes (a character is 0.6 em ≈ 6.6 px wide).
const LABEL_CHARS: usize = 27;
const LINE_CHARS: usize = 200;

#[derive(Default)]
struct ReplicaLane {
    started: Option<f64>,
    ended: Option<f64>,
    marks: Vec<(f64, &'static str, String)>,
    /// (from, held) segments of held tasks/tokens.
    held: Vec<(f64, usize)>,
}

struct Txn {
    begin: f64,
    end: Option<(f64, bool)>,
}

/// One row of the fault lanes: from `at` to `until` (run seconds).
struct Band {
    at: f64,
    until: f64,
    label: String,
    detail: String,
    color: &'static str,
}

/// A fault of the run's schedule, for [`render`].
#[derive(Clone, Debug)]
pub struct ScheduledFault {
    /// When it fired, from the start of the fault period.
    pub at: Duration,
    /// How long it lasted (zero: instantaneous).
    pub duration: Duration,
    /// The schedule's kind name (`harness::faults::Fault::kind`, in simulation builds).
    pub kind: &'static str,
    /// What it hit (`replica-1`, `kafka-broker-2`), if it names a node.
    pub hit: Option<String>,
    /// The schedule's line for it.
    pub text: String,
}

/// What [`render`] draws besides the trace.
#[derive(Clone, Debug, Default)]
pub struct Picture<'a> {
    /// The title.
    pub title: String,
    /// The run's trace.
    pub events: &'a [Event],
    /// When the fault period started (the time axis counts from here); `None`: the start of
    /// the run.
    pub origin: Option<Duration>,
    /// The run's schedule: drawn instead of the trace's fault events.
    pub faults: Option<Vec<ScheduledFault>>,
    /// The violations to list (else the trace's).
    pub violations: Option<Vec<String>>,
    /// The reference run's trace and the start of its fault period, drawn under the run.
    pub reference: Option<(&'a [Event], Duration)>,
    /// Printed under the violations.
    pub notes: Vec<String>,
}

/// What one trace draws: replica and transaction lanes, violations, the buggify window.
#[derive(Default)]
struct Lanes {
    replicas: BTreeMap<String, ReplicaLane>,
    txns: BTreeMap<String, Vec<Txn>>,
    bands: Vec<Band>,
    violations: Vec<(f64, String)>,
    buggify: Option<(f64, Option<f64>)>,
    /// The engine's stalls at its fault points: (from, until, what).
    stalls: Vec<(f64, f64, String)>,
    faults_stop: Option<f64>,
    end: f64,
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// A duration written by `Debug` (`1.5s`, `250ms`, `12.3µs`) in seconds.
fn parse_duration(text: &str) -> Option<f64> {
    let text = text.trim().trim_end_matches([')', ',']);
    let (number, unit) = text.split_at(text.find(|c: char| c.is_alphabetic() || c == 'µ')?);
    let value: f64 = number.parse().ok()?;
    Some(match unit {
        "s" => value,
        "ms" => value / 1e3,
        "µs" | "us" => value / 1e6,
        "ns" => value / 1e9,
        _ => return None,
    })
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word is cut);
/// continuation lines indented four more than the first.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let indent = text.len() - text.trim_start().len();
    let more = " ".repeat(indent + 4);
    let mut lines = Vec::new();
    let mut line = text[..indent].to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        let mut word = word.to_owned();
        loop {
            let used = line.chars().count();
            let need = word.chars().count() + usize::from(!empty);
            if used + need <= width {
                if !empty {
                    line.push(' ');
                }
                line.push_str(&word);
                empty = false;
                break;
            }
            if empty {
                // A word longer than a line: cut it.
                let room = width.saturating_sub(used).max(1);
                let cut: String = word.chars().take(room).collect();
                line.push_str(&cut);
                word = word.chars().skip(room).collect();
                lines.push(std::mem::replace(&mut line, more.clone()));
                if word.is_empty() {
                    break;
                }
                continue;
            }
            lines.push(std::mem::replace(&mut line, more.clone()));
            empty = true;
        }
    }
    if !empty || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// A label cut to the lane label's width.
fn short(text: &str) -> String {
    if text.chars().count() <= LABEL_CHARS {
        text.to_owned()
    } else {
        let cut: String = text.chars().take(LABEL_CHARS - 1).collect();
        format!("{cut}…")
    }
}

/// The schedule's kind name of a fault event's kind (the cluster traces an isolation as a
/// network partition).
fn schedule_kind(traced: &str) -> &str {
    match traced {
        "network-partition" => "isolate",
        other => other,
    }
}

/// The lanes of `events`, their times shifted by `shift` seconds.
fn lanes(events: &[Event], shift: f64) -> Lanes {
    let mut lanes = Lanes { end: events.last().map_or(0.0, |e| seconds(e.at) + shift), ..Lanes::default() };
    // Isolations end when the network heals: (name, band index).
    let mut isolated: Vec<(String, usize)> = Vec::new();
    for event in events {
        let at = seconds(event.at) + shift;
        let what = event.what.as_str();
        if let Some(rest) = what.strip_prefix("FAULT ") {
            let (kind, detail) = rest.split_once(": ").unwrap_or((rest, ""));
            if kind.starts_with("kafka-") {
                continue; // per-request faults: too many to draw; the request-chaos band covers them
            }
            let kind = schedule_kind(kind);
            let until = detail
                .split(" for ")
                .nth(1)
                .and_then(|d| parse_duration(d.split_whitespace().next().unwrap_or("")))
                .map_or(at, |d| at + d);
            if kind == "isolate" {
                isolated.push((detail.trim().to_owned(), lanes.bands.len()));
            }
            let target = detail.split_whitespace().next().unwrap_or("");
            lanes.bands.push(Band {
                at,
                until,
                label: format!("{kind} {target}"),
                detail: format!("{kind} {detail}"),
                color: "#f5a623",
            });
        } else if let Some(name) = what.strip_prefix("network healed: ") {
            if let Some(i) = isolated.iter().position(|(n, _)| n == name) {
                let (_, band) = isolated.remove(i);
                lanes.bands[band].until = at;
            }
        } else if let Some(rest) = what.strip_prefix("VIOLATION ") {
            lanes.violations.push((at, rest.to_owned()));
        } else if let Some(stall) = what.strip_prefix("buggify: ") {
            let ms = stall.rsplit(' ').nth(1).and_then(|ms| ms.parse::<f64>().ok()).unwrap_or(0.0);
            lanes.stalls.push((at, at + ms / 1e3, stall.to_owned()));
        } else if what == "buggify on" {
            lanes.buggify = Some((at, None));
        } else if what == "faults stop" {
            lanes.faults_stop = Some(at);
            if let Some((_, end @ None)) = &mut lanes.buggify {
                *end = Some(at);
            }
        } else if let Some(rest) = what.strip_prefix("kafka: txn ") {
            let Some((id, action)) = rest.split_once(": ") else { continue };
            let lane = lanes.txns.entry(id.to_owned()).or_default();
            if action.starts_with("begin") {
                lane.push(Txn { begin: at, end: None });
            } else if action.starts_with("complete commit") || action.starts_with("complete abort") {
                let committed = action.starts_with("complete commit");
                if let Some(open) = lane.iter_mut().rev().find(|t| t.end.is_none()) {
                    open.end = Some((at, committed));
                }
            }
        } else if let Some((name, rest)) = what.split_once(": ") {
            if !name.starts_with("replica-") || name.contains(' ') {
                continue;
            }
            let lane = lanes.replicas.entry(name.to_owned()).or_default();
            if rest == "started" {
                lane.started = Some(at);
            } else if rest.starts_with("application start") {
                lane.started.get_or_insert(at);
                lane.marks.push((at, "start", rest.to_owned()));
                lane.held.push((at, 0));
            } else if let Some(why) = rest.strip_prefix("application crashed: ") {
                lane.marks.push((at, "crash", why.to_owned()));
                lane.held.push((at, 0));
            } else if rest == "application stopped" || rest == "removed" {
                lane.ended = Some(at);
            } else if let Some(count) = rest.strip_suffix(" tasks").or_else(|| rest.strip_suffix(" tokens")) {
                if let Ok(count) = count.parse() {
                    lane.held.push((at, count));
                }
            }
        }
        if let Some(name) = what.strip_prefix("FAULT remove-replica: ") {
            lanes.replicas.entry(name.trim().to_owned()).or_default().ended = Some(at);
        }
    }
    lanes
}

/// Renders `events` as an SVG document titled `title`, with `notes` (e.g. the violations and
/// the schedule) printed under the lanes; the fault rows from the trace's fault events, the
/// time axis from the start of the run.
pub fn render_svg(events: &[Event], title: &str, notes: &[String]) -> String {
    render(&Picture { title: title.to_owned(), events, notes: notes.to_vec(), ..Picture::default() })
}

/// Renders a [`Picture`] as an SVG document.
pub fn render(picture: &Picture<'_>) -> String {
    let mut run = lanes(picture.events, 0.0);
    let origin = picture.origin.map_or(0.0, seconds);
    if let Some(faults) = &picture.faults {
        run.bands = faults
            .iter()
            .map(|f| {
                let at = origin + seconds(f.at);
                Band {
                    at,
                    until: at + seconds(f.duration),
                    label: match &f.hit {
                        Some(hit) => format!("{} {hit}", f.kind),
                        None => f.kind.to_owned(),
                    },
                    detail: f.text.clone(),
                    color: "#f5a623",
                }
            })
            .collect();
    }
    if let Some((from, until)) = run.buggify {
        run.bands.push(Band {
            at: from,
            until: until.unwrap_or(run.end),
            label: "buggify (engine)".to_owned(),
            detail: format!(
                "the engine's fault points (buggify) on: each may stall the engine, up to 3 s; {} stalled",
                run.stalls.len()
            ),
            color: "#e6b3f2",
        });
    }
    let reference = picture.reference.map(|(events, ref_origin)| lanes(events, origin - seconds(ref_origin)));
    let start = reference.as_ref().map_or(0.0, |r| r.replicas.values().filter_map(|l| l.started).fold(0.0, f64::min));
    let end = reference.as_ref().map_or(run.end, |r| r.end.max(run.end)).max(start + 1.0);
    let listed: Vec<String> = match &picture.violations {
        Some(violations) => violations
            .iter()
            .map(|v| match run.violations.iter().find(|(_, text)| text == v) {
                Some((at, _)) => format!("VIOLATION at {:.3}s: {v}", at - origin),
                None => format!("VIOLATION: {v}"),
            })
            .collect(),
        None => run.violations.iter().map(|(at, v)| format!("VIOLATION at {:.3}s: {v}", at - origin)).collect(),
    };
    let listed: Vec<String> = listed.iter().flat_map(|l| wrap(l, LINE_CHARS)).collect();
    let notes: Vec<String> = picture.notes.iter().flat_map(|n| wrap(n, LINE_CHARS)).collect();

    let x = |t: f64| LEFT + ((t - start) / (end - start)) * (WIDTH - LEFT - 20.0);
    let reference_rows = reference.as_ref().map_or(0, |r| 1 + r.replicas.len() + r.txns.len());
    let rows = run.bands.len() + run.replicas.len() + run.txns.len() + reference_rows;
    let notes_height = (notes.len() + listed.len()) as f64 * 16.0 + 40.0;
    let height = 70.0 + rows as f64 * LANE + 50.0 + notes_height;
    let lanes_bottom = height - notes_height - 20.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">{}</text>
"#,
        escape(&picture.title)
    );
    // Time axis, labelled with its origin.
    let axis_y = 40.0;
    let axis = if picture.origin.is_some() {
        "time from the start of the fault period (the first replica ran tasks), s"
    } else {
        "time from the start of the run, s"
    };
    let _ =
        writeln!(svg, r##"<text id="axis" x="{}" y="20" text-anchor="end" fill="#666">{axis}</text>"##, WIDTH - 20.0);
    let span = end - start;
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0]
        .into_iter()
        .find(|s| span / s <= 25.0)
        .unwrap_or(1200.0);
    let mut k = ((start - origin) / step).ceil();
    while origin + k * step <= end {
        let t = origin + k * step;
        let _ = writeln!(
            svg,
            r##"<line x1="{0}" y1="{axis_y}" x2="{0}" y2="{lanes_bottom}" stroke="#eee"/><text x="{0}" y="{1}" text-anchor="middle" fill="#666">{2}s</text>"##,
            x(t),
            axis_y - 4.0,
            k * step + 0.0 // not "-0s"
        );
        k += 1.0;
    }
    if picture.origin.is_some() {
        let _ = writeln!(
            svg,
            r##"<line x1="{0}" y1="{axis_y}" x2="{0}" y2="{lanes_bottom}" stroke="#999"/><text x="{1}" y="{2}" fill="#666">faults start</text>"##,
            x(origin),
            x(origin) + 3.0,
            axis_y + 12.0
        );
    }
    if let Some(stop) = run.faults_stop {
        let _ = writeln!(
            svg,
            r##"<line x1="{0}" y1="{axis_y}" x2="{0}" y2="{lanes_bottom}" stroke="#999" stroke-dasharray="2 2"/><text x="{1}" y="{2}" text-anchor="end" fill="#666">faults stop</text>"##,
            x(stop),
            x(stop) - 3.0,
            axis_y + 12.0
        );
    }
    let mut y = 60.0;
    let label = |svg: &mut String, y: f64, text: &str, color: &str| {
        let _ = writeln!(
            svg,
            r#"<text x="8" y="{}" fill="{color}">{}<title>{}</title></text>"#,
            y + 14.0,
            escape(&short(text)),
            escape(text)
        );
    };
    for band in &run.bands {
        let width = (x(band.until) - x(band.at)).max(2.0);
        label(&mut svg, y, &band.label, "#a60");
        let _ = writeln!(
            svg,
            r##"<rect class="fault" x="{}" y="{}" width="{width}" height="{}" fill="{}" opacity="0.55"><title>{} at {:.3}s</title></rect>"##,
            x(band.at),
            y + 3.0,
            LANE - 6.0,
            band.color,
            escape(&band.detail),
            band.at - origin
        );
        if band.label.starts_with("buggify") {
            for (from, until, what) in &run.stalls {
                let _ = writeln!(
                    svg,
                    r##"<rect class="stall" x="{}" y="{}" width="{}" height="{}" fill="#7b1fa2"><title>buggify: {} at {:.3}s</title></rect>"##,
                    x(*from),
                    y + 3.0,
                    (x(*until) - x(*from)).max(1.5),
                    LANE - 6.0,
                    escape(what),
                    from - origin
                );
            }
        }
        y += LANE;
    }
    draw_lanes(&mut svg, &run, &mut y, &x, end, origin, &label);
    if let Some(reference) = &reference {
        let _ = writeln!(
            svg,
            r##"<line x1="0" y1="{y}" x2="{WIDTH}" y2="{y}" stroke="#999"/><text id="reference" x="8" y="{}" font-weight="bold" fill="#333">reference run (one replica, no faults, fed what the chaos run committed; aligned at its fault period's start): the oracle compares the two runs' committed outputs and state</text>"##,
            y + 14.0
        );
        y += LANE;
        draw_lanes(&mut svg, reference, &mut y, &x, end, origin, &|svg: &mut String, y, text: &str, color| {
            label(svg, y, &format!("ref {text}"), color)
        });
    }
    for (at, _) in &run.violations {
        let _ = writeln!(
            svg,
            r##"<line x1="{0}" y1="50" x2="{0}" y2="{y}" stroke="#d0021b" stroke-dasharray="4 3"/>"##,
            x(*at)
        );
    }
    y += 30.0;
    for line in &listed {
        let _ = writeln!(
            svg,
            r##"<text class="violation" x="8" y="{y}" fill="#d0021b" xml:space="preserve">{}</text>"##,
            escape(line)
        );
        y += 16.0;
    }
    for note in &notes {
        let _ = writeln!(
            svg,
            r##"<text class="note" x="8" y="{y}" fill="#333" xml:space="preserve">{}</text>"##,
            escape(note)
        );
        y += 16.0;
    }
    svg.push_str("</svg>\n");
    svg
}

/// Draws the replica and transaction lanes of `lanes` from `y` down.
fn draw_lanes(
    svg: &mut String,
    lanes: &Lanes,
    y: &mut f64,
    x: &dyn Fn(f64) -> f64,
    end: f64,
    origin: f64,
    label: &dyn Fn(&mut String, f64, &str, &str),
) {
    for (name, lane) in &lanes.replicas {
        label(svg, *y, name, "#000");
        let from = lane.started.unwrap_or(0.0);
        let to = lane.ended.unwrap_or(lanes.end.min(end));
        let _ = writeln!(
            svg,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#dde8f5"/>"##,
            x(from),
            *y + 4.0,
            (x(to) - x(from)).max(1.0),
            LANE - 8.0
        );
        for (i, &(at, held)) in lane.held.iter().enumerate() {
            let until = lane.held.get(i + 1).map_or(to, |next| next.0);
            if held == 0 || until <= at {
                continue;
            }
            let width = (x(until) - x(at)).max(1.0);
            let _ = writeln!(
                svg,
                r##"<rect x="{}" y="{}" width="{width}" height="{}" fill="#4a90d9" opacity="{}"><title>{name}: {held} held from {:.3}s</title></rect>"##,
                x(at),
                *y + 4.0,
                LANE - 8.0,
                (0.35 + 0.15 * held as f64).min(1.0),
                at - origin
            );
            if width > 14.0 {
                let _ = writeln!(svg, r#"<text x="{}" y="{}" fill="white">{held}</text>"#, x(at) + 3.0, *y + 15.0);
            }
        }
        for (at, kind, text) in &lane.marks {
            let (glyph, color) = if *kind == "crash" { ("✖", "#d0021b") } else { ("▲", "#417505") };
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" fill="{color}" text-anchor="middle">{glyph}<title>{name} at {:.3}s: {}</title></text>"#,
                x(*at),
                *y + 15.0,
                at - origin,
                escape(text)
            );
        }
        *y += LANE;
    }
    for (id, lane) in &lanes.txns {
        label(svg, *y, &format!("txn {id}"), "#333");
        for txn in lane {
            let (until, color, state) = match txn.end {
                Some((at, true)) => (at, "#7ed321", "committed"),
                Some((at, false)) => (at, "#d0021b", "aborted"),
                None => (lanes.end, "#9b9b9b", "open at the end"),
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{color}"><title>{id}: {:.3}s..{:.3}s {state}</title></rect>"#,
                x(txn.begin),
                *y + 6.0,
                (x(until) - x(txn.begin)).max(1.5),
                LANE - 12.0,
                txn.begin - origin,
                until - origin
            );
        }
        *y += LANE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at_ms: u64, what: &str) -> Event {
        Event { at: Duration::from_millis(at_ms), what: what.to_owned() }
    }

    #[test]
    fn lanes_marks_and_transactions_are_drawn() {
        let events = vec![
            event(0, "replica-0: started"),
            event(10, "replica-0: application start #1"),
            event(500, "replica-0: 2 tasks"),
            event(600, "kafka: txn app-0: begin #1 (producer 1 epoch 0)"),
            event(700, "kafka: txn app-0: complete commit #1"),
            event(800, "kafka: txn app-0: begin #2 (producer 1 epoch 0)"),
            event(900, "FAULT crash-restart: replica-0"),
            event(950, "replica-0: application crashed: killed"),
            event(1200, "kafka: txn app-0: complete abort #2"),
            event(1300, "FAULT pause: replica-0 for 1.5s"),
            event(3000, "VIOLATION lost an output"),
        ];
        let svg = render_svg(&events, "seed 7", &["shrunk: 1 fault".to_owned()]);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("txn app-0"), "a transaction lane");
        assert!(svg.contains("#7ed321") && svg.contains("#d0021b"), "a committed and an aborted transaction");
        assert!(svg.contains("✖"), "the crash mark");
        assert!(svg.contains("pause replica-0 for 1.5s"), "the pause band");
        assert!(svg.contains("VIOLATION at 3.000s: lost an output"));
        assert!(svg.contains("shrunk: 1 fault"));
    }

    #[test]
    fn the_trace_s_isolation_is_the_schedule_s_isolate_band_until_the_network_heals() {
        let events = vec![
            event(0, "replica-1: started"),
            event(2000, "FAULT network-partition: replica-1"),
            event(9000, "network healed: replica-1"),
            event(10_000, "faults stop"),
        ];
        let svg = render_svg(&events, "seed 1", &[]);
        assert!(svg.contains(">isolate replica-1<") && !svg.contains("network-partition"), "{svg}");
        assert!(svg.contains("time from the start of the run"), "{svg}");
        let band = svg.lines().find(|l| l.contains(r#"class="fault""#)).expect("a fault band");
        let width: f64 = band
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .expect("a width");
        assert!(width > 500.0, "7 s of 10 are a wide band, not a tick: {band}");
    }

    #[test]
    fn a_picture_counts_from_the_fault_period_draws_the_schedule_and_the_reference_and_wraps() {
        let events = vec![
            event(0, "replica-0: started"),
            event(3000, "buggify on"),
            event(5000, "FAULT network-partition: replica-0"),
            event(20_000, "faults stop"),
        ];
        let reference = vec![event(0, "replica-0: started"), event(2500, "replica-0: 4 tasks")];
        let long = "outputs of sums/acct-1: ".to_owned() + &"{\"sum\":1}, ".repeat(60);
        let picture = Picture {
            title: "seed 2".to_owned(),
            events: &events,
            origin: Some(Duration::from_secs(3)),
            faults: Some(vec![ScheduledFault {
                at: Duration::from_secs(2),
                duration: Duration::from_secs(7),
                kind: "isolate",
                hit: Some("replica-0".to_owned()),
                text: "isolate replica#7 → replica-0 for 7s".to_owned(),
            }]),
            violations: Some(vec![long.clone()]),
            reference: Some((&reference, Duration::from_millis(2500))),
            notes: vec!["  +  2.000s isolate replica#7 → replica-0 for 7s".to_owned()],
        };
        let svg = render(&picture);
        assert!(svg.contains("time from the start of the fault period"), "{svg}");
        assert!(svg.contains(">isolate replica-0<") && svg.contains("isolate replica#7 → replica-0 for 7s at 2.000s"));
        assert!(svg.contains(">buggify (engine)<"), "the buggify window");
        assert!(svg.contains(r#"id="reference""#) && svg.contains(">ref replica-0<"), "the reference lanes");
        let lines: Vec<&str> = svg.lines().filter(|l| l.contains(r#"class="violation""#)).collect();
        assert!(lines.len() >= 3, "a long violation wraps: {lines:?}");
        let text = |l: &str| l.split_once('>').map_or("", |(_, t)| t).replace("</text>", "").replace("&quot;", "\"");
        assert!(lines.iter().all(|l| text(l).chars().count() <= LINE_CHARS), "{lines:?}");
    }

    #[test]
    fn wrapping_keeps_words_and_indents_continuations() {
        assert_eq!(wrap("  aaa bbb ccc", 9), ["  aaa bbb", "      ccc"]);
        assert_eq!(wrap("abcdefghijklmnop", 10), ["abcdefghij", "    klmnop"]);
        assert_eq!(wrap("", 10), [""]);
    }

    #[test]
    fn debug_durations_parse() {
        assert_eq!(parse_duration("1.5s"), Some(1.5));
        assert_eq!(parse_duration("250ms"), Some(0.25));
        assert_eq!(parse_duration("3µs"), Some(3e-6));
        assert_eq!(parse_duration("soon"), None);
    }
}
