//! A failing run as a picture: an SVG timeline rendered from a run's trace.
//!
//! Lanes over simulated time, top to bottom:
//! - the fault bands (one row per fault that lasts, a tick for the instantaneous ones);
//! - one lane per replica: alive from its start, each application start (▲), crash (✖) and
//!   stop, shaded by how many tasks or tokens it held (the number is written in the band);
//! - one lane per transactional id: every transaction as a bar from its begin to its end,
//!   green when it committed, red when it aborted (fenced, timed out or failed), grey while it
//!   was still open at the end;
//! - the violations, listed under the lanes, with a marker at the time each was recorded.
//!
//! It reads only the trace's text (the events every scenario and the harness already record),
//! so it works for any run: `flechtwerk-sim --seed S --timeline FILE`, or the chaos harness
//! for a failing seed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::trace::Event;

const LANE: f64 = 22.0;
const LEFT: f64 = 190.0;
const WIDTH: f64 = 1400.0;

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

struct Band {
    at: f64,
    until: f64,
    label: String,
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

/// Renders `events` as an SVG document titled `title`, with `notes` (e.g. the violations and
/// the shrunk schedule) printed under the lanes.
pub fn render_svg(events: &[Event], title: &str, notes: &[String]) -> String {
    let end = events.last().map(|e| seconds(e.at)).unwrap_or(1.0).max(1.0);
    let mut replicas: BTreeMap<String, ReplicaLane> = BTreeMap::new();
    let mut txns: BTreeMap<String, Vec<Txn>> = BTreeMap::new();
    let mut bands: Vec<Band> = Vec::new();
    let mut violations: Vec<(f64, String)> = Vec::new();
    for event in events {
        let at = seconds(event.at);
        let what = event.what.as_str();
        if let Some(rest) = what.strip_prefix("FAULT ") {
            let (kind, detail) = rest.split_once(": ").unwrap_or((rest, ""));
            let until = detail
                .split(" for ")
                .nth(1)
                .and_then(|d| parse_duration(d.split_whitespace().next().unwrap_or("")))
                .map_or(at, |d| at + d);
            if kind.starts_with("kafka-") {
                continue; // per-request faults: too many to draw; the request-chaos band covers them
            }
            bands.push(Band { at, until, label: format!("{kind} {detail}") });
        } else if let Some(rest) = what.strip_prefix("VIOLATION ") {
            violations.push((at, rest.to_owned()));
        } else if let Some(rest) = what.strip_prefix("kafka: txn ") {
            let Some((id, action)) = rest.split_once(": ") else { continue };
            let lane = txns.entry(id.to_owned()).or_default();
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
            let lane = replicas.entry(name.to_owned()).or_default();
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
            replicas.entry(name.trim().to_owned()).or_default().ended = Some(at);
        }
    }

    let x = |t: f64| LEFT + (t / end) * (WIDTH - LEFT - 20.0);
    let rows = bands.len() + replicas.len() + txns.len();
    let notes_height = (notes.len() + violations.len()) as f64 * 16.0 + 40.0;
    let height = 70.0 + rows as f64 * LANE + 50.0 + notes_height;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="monospace" font-size="11">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="20" font-size="14" font-weight="bold">{}</text>
"#,
        escape(title)
    );
    // Time axis.
    let axis_y = 40.0;
    let step = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0]
        .into_iter()
        .find(|s| end / s <= 25.0)
        .unwrap_or(1200.0);
    let mut t = 0.0;
    while t <= end {
        let _ = writeln!(
            svg,
            r##"<line x1="{0}" y1="{axis_y}" x2="{0}" y2="{1}" stroke="#eee"/><text x="{0}" y="{2}" text-anchor="middle" fill="#666">{t}s</text>"##,
            x(t),
            height - notes_height - 20.0,
            axis_y - 4.0
        );
        t += step;
    }
    let mut y = 60.0;
    let label = |svg: &mut String, y: f64, text: &str, color: &str| {
        let _ = writeln!(svg, r#"<text x="8" y="{}" fill="{color}">{}</text>"#, y + 14.0, escape(text));
    };
    for band in &bands {
        let width = (x(band.until) - x(band.at)).max(2.0);
        label(&mut svg, y, band.label.split_whitespace().next().unwrap_or(""), "#a60");
        let _ = writeln!(
            svg,
            r##"<rect x="{}" y="{}" width="{width}" height="{}" fill="#f5a623" opacity="0.55"><title>{} at {:.3}s</title></rect>"##,
            x(band.at),
            y + 3.0,
            LANE - 6.0,
            escape(&band.label),
            band.at
        );
        y += LANE;
    }
    for (name, lane) in &replicas {
        label(&mut svg, y, name, "#000");
        let from = lane.started.unwrap_or(0.0);
        let to = lane.ended.unwrap_or(end);
        let _ = writeln!(
            svg,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#dde8f5"/>"##,
            x(from),
            y + 4.0,
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
                r##"<rect x="{}" y="{}" width="{width}" height="{}" fill="#4a90d9" opacity="{}"><title>{name}: {held} held from {at:.3}s</title></rect>"##,
                x(at),
                y + 4.0,
                LANE - 8.0,
                (0.35 + 0.15 * held as f64).min(1.0)
            );
            if width > 14.0 {
                let _ = writeln!(svg, r#"<text x="{}" y="{}" fill="white">{held}</text>"#, x(at) + 3.0, y + 15.0);
            }
        }
        for (at, kind, text) in &lane.marks {
            let (glyph, color) = if *kind == "crash" { ("✖", "#d0021b") } else { ("▲", "#417505") };
            let _ = writeln!(
                svg,
                r#"<text x="{}" y="{}" fill="{color}" text-anchor="middle">{glyph}<title>{name} at {at:.3}s: {}</title></text>"#,
                x(*at),
                y + 15.0,
                escape(text)
            );
        }
        y += LANE;
    }
    for (id, lane) in &txns {
        label(&mut svg, y, &format!("txn {id}"), "#333");
        for txn in lane {
            let (until, color, state) = match txn.end {
                Some((at, true)) => (at, "#7ed321", "committed"),
                Some((at, false)) => (at, "#d0021b", "aborted"),
                None => (end, "#9b9b9b", "open at the end"),
            };
            let _ = writeln!(
                svg,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{color}"><title>{id}: {:.3}s..{until:.3}s {state}</title></rect>"#,
                x(txn.begin),
                y + 6.0,
                (x(until) - x(txn.begin)).max(1.5),
                LANE - 12.0,
                txn.begin
            );
        }
        y += LANE;
    }
    for (at, _) in &violations {
        let _ = writeln!(
            svg,
            r##"<line x1="{0}" y1="50" x2="{0}" y2="{y}" stroke="#d0021b" stroke-dasharray="4 3"/>"##,
            x(*at)
        );
    }
    y += 30.0;
    for (at, text) in &violations {
        let _ = writeln!(svg, r##"<text x="8" y="{y}" fill="#d0021b">VIOLATION at {at:.3}s: {}</text>"##, escape(text));
        y += 16.0;
    }
    for note in notes {
        let _ = writeln!(svg, r##"<text x="8" y="{y}" fill="#333" xml:space="preserve">{}</text>"##, escape(note));
        y += 16.0;
    }
    svg.push_str("</svg>\n");
    svg
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
    fn debug_durations_parse() {
        assert_eq!(parse_duration("1.5s"), Some(1.5));
        assert_eq!(parse_duration("250ms"), Some(0.25));
        assert_eq!(parse_duration("3µs"), Some(3e-6));
        assert_eq!(parse_duration("soon"), None);
    }
}
